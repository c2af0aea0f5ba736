package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeagent/kubelet/pkg/apiserver/admission"
	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// objectIndex reads committed objects from the store for the authorizer,
// the token authenticator and admission: pods by node, and single objects
// by name. Every object it returns is a fresh copy. It is safe for
// concurrent use.
type objectIndex struct {
	store *storage.Store
	codec registry.Codec
}

var (
	_ auth.PodIndex             = objectIndex{}
	_ auth.ObjectGetter         = objectIndex{}
	_ auth.VolumeIndex          = objectIndex{}
	_ auth.AttachmentIndex      = objectIndex{}
	_ auth.SliceIndex           = objectIndex{}
	_ admission.ServiceLister   = objectIndex{}
	_ admission.NamespaceGetter = objectIndex{}
)

// PodsOnNode implements auth.PodIndex.
func (x objectIndex) PodsOnNode(node string) []*corev1.Pod {
	objs := x.store.Select("pods/", func(o *storage.Object) bool { return o.Fields["spec.nodeName"] == node })
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if obj, err := x.codec.Decode(o.Key, o.Raw); err == nil {
			out = append(out, obj.(*corev1.Pod))
		}
	}
	return out
}

// getObject returns the object at resource/namespace/name as a T, or the
// API's NotFound.
func getObject[T any](x objectIndex, resource, namespace, name string) (*T, error) {
	o, ok := x.store.Get(resource + "/" + namespace + "/" + name)
	if ok {
		if obj, err := x.codec.Decode(o.Key, o.Raw); err == nil {
			if t, ok := any(obj).(*T); ok {
				return t, nil
			}
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource(resource), name)
}

// ServiceAccount implements auth.ObjectGetter.
func (x objectIndex) ServiceAccount(namespace, name string) (*corev1.ServiceAccount, error) {
	return getObject[corev1.ServiceAccount](x, "serviceaccounts", namespace, name)
}

// Pod implements auth.ObjectGetter.
func (x objectIndex) Pod(namespace, name string) (*corev1.Pod, error) {
	return getObject[corev1.Pod](x, "pods", namespace, name)
}

// Secret implements auth.ObjectGetter.
func (x objectIndex) Secret(namespace, name string) (*corev1.Secret, error) {
	return getObject[corev1.Secret](x, "secrets", namespace, name)
}

// Namespace implements admission.NamespaceGetter.
func (x objectIndex) Namespace(name string) (*corev1.Namespace, error) {
	return getObject[corev1.Namespace](x, "namespaces", "", name)
}

// Node implements auth.ObjectGetter.
func (x objectIndex) Node(name string) (*corev1.Node, error) {
	return getObject[corev1.Node](x, "nodes", "", name)
}

// PersistentVolume implements auth.VolumeIndex.
func (x objectIndex) PersistentVolume(name string) (*corev1.PersistentVolume, bool) {
	pv, err := getObject[corev1.PersistentVolume](x, "persistentvolumes", "", name)
	return pv, err == nil
}

// PersistentVolumeClaim implements auth.StorageGetter.
func (x objectIndex) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, bool) {
	pvc, err := getObject[corev1.PersistentVolumeClaim](x, "persistentvolumeclaims", namespace, name)
	return pvc, err == nil
}

// CSIDriver implements auth.StorageGetter.
func (x objectIndex) CSIDriver(name string) (*storagev1.CSIDriver, bool) {
	d, err := getObject[storagev1.CSIDriver](x, "csidrivers", "", name)
	return d, err == nil
}

// VolumeAttachment implements auth.AttachmentIndex.
func (x objectIndex) VolumeAttachment(name string) (*storagev1.VolumeAttachment, bool) {
	va, err := getObject[storagev1.VolumeAttachment](x, "volumeattachments", "", name)
	return va, err == nil
}

// ResourceSlice implements auth.SliceIndex.
func (x objectIndex) ResourceSlice(name string) (*resourcev1.ResourceSlice, bool) {
	s, err := getObject[resourcev1.ResourceSlice](x, "resourceslices", "", name)
	return s, err == nil
}

// ResourceClaim returns the claim namespace/name, or the API's NotFound.
func (x objectIndex) ResourceClaim(namespace, name string) (*resourcev1.ResourceClaim, error) {
	return getObject[resourcev1.ResourceClaim](x, "resourceclaims", namespace, name)
}

// Services implements admission.ServiceLister.
func (x objectIndex) Services() []*corev1.Service {
	objs, _ := x.store.List("services/")
	out := make([]*corev1.Service, 0, len(objs))
	for _, o := range objs {
		if obj, err := x.codec.Decode(o.Key, o.Raw); err == nil {
			if svc, ok := obj.(*corev1.Service); ok {
				out = append(out, svc)
			}
		}
	}
	return out
}
