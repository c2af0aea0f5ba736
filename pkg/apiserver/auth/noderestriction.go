package auth

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// PodGetter reads a pod by namespace and name (the store's NotFound when it
// is missing).
type PodGetter interface {
	Pod(namespace, name string) (*corev1.Pod, error)
}

// StorageGetter reads the claims, volumes and CSIDrivers behind a pod's
// volumes: what says which audiences its CSI drivers take tokens for.
type StorageGetter interface {
	PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, bool)
	PersistentVolume(name string) (*corev1.PersistentVolume, bool)
	CSIDriver(name string) (*storagev1.CSIDriver, bool)
}

// NodeRestriction is the admission half of node limits: it checks the
// objects a node writes, as upstream's NodeRestriction plugin does. Pods
// looks up the pod a node's TokenRequest is bound to, Storage (optional) the
// CSI drivers of its volumes.
type NodeRestriction struct {
	Pods    PodGetter
	Storage StorageGetter
}

var _ rest.Admitter = NodeRestriction{}

// Admit implements rest.Admitter.
func (nr NodeRestriction) Admit(_ context.Context, a *rest.Attributes) error {
	if a.User == nil || a.User.InGroup(GroupMasters) {
		return nil
	}
	node, ok := NodeName(a.User)
	if !ok {
		return nil
	}
	deny := func(format string, args ...any) error {
		return apierrors.NewForbidden(a.Resource.GroupResource(), nameOf(a.Object, a.Old),
			fmt.Errorf("node %q %s", node, fmt.Sprintf(format, args...)))
	}
	switch a.Resource.Group + "/" + a.Resource.Name {
	case "/pods":
		if a.Old == nil {
			pod := a.Object.(*corev1.Pod)
			if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
				return deny("can only create mirror pods")
			}
			if pod.Spec.NodeName != node {
				return deny("can only create pods with spec.nodeName set to itself")
			}
			if !ownedByNode(pod, node) {
				return deny("can only create pods with a single controller owner reference set to itself")
			}
			if what := apiObjectReference(pod); what != "" {
				return deny("can not create pods that reference %s", what)
			}
			return nil
		}
		if old := a.Old.(*corev1.Pod); old.Spec.NodeName != node {
			return deny("can only modify or delete pods bound to itself")
		}
		if cur, ok := a.Object.(*corev1.Pod); ok && a.Info != nil && a.Info.Subresource == "status" &&
			claimStatusesChanged(a.Old.(*corev1.Pod), cur) {
			return deny("%v", errClaimStatuses)
		}
	case "/nodes":
		if nameOf(a.Object, a.Old) != node {
			return deny("can only modify its own node object")
		}
		obj, _ := a.Object.(*corev1.Node)
		old, _ := a.Old.(*corev1.Node)
		if err := AdmitOwnNode(node, obj, old); err != nil {
			return apierrors.NewForbidden(a.Resource.GroupResource(), node, err)
		}
	case "coordination.k8s.io/leases":
		if nameOf(a.Object, a.Old) != node {
			return deny("can only modify its own lease")
		}
	case "resource.k8s.io/resourceslices":
		return admitResourceSlice(node, a)
	case "storage.k8s.io/csinodes":
		if nameOf(a.Object, a.Old) != node {
			return deny("can only access CSINode with the same name as the requesting node")
		}
	case "/serviceaccounts":
		if a.Info == nil || a.Info.Subresource != "token" || a.Old != nil {
			return nil
		}
		tr, ok := a.Object.(*authenticationv1.TokenRequest)
		if !ok {
			return deny("sent an unexpected %T", a.Object)
		}
		return nr.admitTokenRequest(node, a, tr)
	case "/persistentvolumeclaims":
		if a.Info == nil || a.Info.Subresource != "status" || a.Old == nil || a.Object == nil {
			return deny("may only update PVC status")
		}
		if !onlyClaimStatusChanged(a.Old.(*corev1.PersistentVolumeClaim), a.Object.(*corev1.PersistentVolumeClaim)) {
			return deny("is not allowed to update fields other than status.capacity, status.conditions and status.allocated*")
		}
	}
	return nil
}

// admitTokenRequest lets a node ask for a token only when it is bound to a
// pod (by name and UID) running on the node, for an audience one of the
// pod's projected token volumes names or the CSIDriver of one of its volumes
// asks for (tokenRequests), as upstream's NodeRestriction with
// ServiceAccountNodeAudienceRestriction (no audience at all matches a
// projection or token request that names none).
func (nr NodeRestriction) admitTokenRequest(node string, a *rest.Attributes, tr *authenticationv1.TokenRequest) error {
	deny := func(err error) error {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Info.Name, err)
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return deny(fmt.Errorf("node requested token not bound to a pod"))
	}
	if ref.UID == "" {
		return deny(fmt.Errorf("node requested token with a pod binding without a uid"))
	}
	if nr.Pods == nil {
		return deny(fmt.Errorf("pods cannot be looked up"))
	}
	pod, err := nr.Pods.Pod(a.Info.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return deny(err)
	}
	if ref.UID != pod.UID {
		return deny(fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. "+
			"The object might have been deleted and then recreated", ref.UID))
	}
	if pod.Spec.NodeName != node {
		return deny(fmt.Errorf("node requested token bound to a pod scheduled on a different node"))
	}
	return tokenAudienceAllowed(pod, tr.Spec.Audiences, a.User.Name, nr.Storage)
}

// tokenAudienceAllowed reports (nil) whether a node may ask for a token with
// audiences for pod: at most one audience, which a serviceAccountToken
// projection of the pod names, or a token request of the CSIDriver of one of
// its volumes (read through storage, when set). The error is upstream's.
func tokenAudienceAllowed(pod *corev1.Pod, audiences []string, user string, storage StorageGetter) error {
	deny := func(err error) error {
		return apierrors.NewForbidden(corev1.Resource("serviceaccounts"), pod.Spec.ServiceAccountName, err)
	}
	want := ""
	switch len(audiences) {
	case 0:
	case 1:
		want = audiences[0]
	default:
		return deny(fmt.Errorf("node may only request 0 or 1 audiences"))
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && t.Audience == want {
				return nil
			}
		}
	}
	if storage != nil {
		for _, driver := range csiDrivers(pod, storage) {
			d, ok := storage.CSIDriver(driver)
			if !ok {
				continue
			}
			for _, r := range d.Spec.TokenRequests {
				if r.Audience == want {
					return nil
				}
			}
		}
	}
	return deny(fmt.Errorf("audience %q not found in pod spec volume, %s is not authorized to request tokens for this audience", want, user))
}

// csiDrivers returns the CSI drivers of pod's volumes: its inline csi
// volumes', and those of the volumes its claims (podfacts.References) are
// bound to.
func csiDrivers(pod *corev1.Pod, storage StorageGetter) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.CSI != nil {
			out = append(out, v.CSI.Driver)
		}
	}
	for _, claim := range podfacts.References(pod).Claims {
		pvc, ok := storage.PersistentVolumeClaim(pod.Namespace, claim)
		if !ok || pvc.Spec.VolumeName == "" {
			continue
		}
		if pv, ok := storage.PersistentVolume(pvc.Spec.VolumeName); ok && pv.Spec.CSI != nil {
			out = append(out, pv.Spec.CSI.Driver)
		}
	}
	return out
}

// onlyClaimStatusChanged reports whether a node's update of a claim's status
// changes nothing but what upstream lets a node change: the capacity, the
// conditions and the allocated resources and their statuses.
func onlyClaimStatusChanged(old, cur *corev1.PersistentVolumeClaim) bool {
	strip := func(c *corev1.PersistentVolumeClaim) corev1.PersistentVolumeClaimStatus {
		st := *c.Status.DeepCopy()
		st.Capacity, st.Conditions, st.AllocatedResources, st.AllocatedResourceStatuses = nil, nil, nil, nil
		return st
	}
	return apiequality.Semantic.DeepEqual(strip(old), strip(cur)) && apiequality.Semantic.DeepEqual(old.Spec, cur.Spec)
}

// apiObjectReference names what of the API a pod refers to, as upstream's
// HasAPIObjectReference does for the mirror pods a node creates; "" when
// nothing.
func apiObjectReference(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return "serviceaccounts"
	}
	r := podfacts.References(pod)
	switch {
	case len(r.Secrets) > 0:
		return "secrets"
	case len(r.ConfigMaps) > 0:
		return "configmaps"
	case len(pod.Spec.ResourceClaims) > 0:
		return "resourceclaims"
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.CSI != nil:
			return "csidrivers (via CSI volumes)"
		case v.Glusterfs != nil: //nolint:staticcheck // still refused, as upstream
			return "endpoints (via glusterFS volumes)"
		case v.PersistentVolumeClaim != nil:
			return "persistentvolumeclaims"
		case v.Ephemeral != nil:
			return "persistentvolumeclaims (via ephemeral volumes)"
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.ServiceAccountToken != nil:
					return "serviceaccounts (via projected volumes)"
				case src.ClusterTrustBundle != nil:
					return "clustertrustbundles"
				case src.PodCertificate != nil:
					return "podcertificates"
				}
			}
		}
	}
	return ""
}

// ownedByNode reports whether a mirror pod has the one owner reference upstream requires: the v1 Node
// node, as controller, without blockOwnerDeletion. (Upstream also checks the owner's UID against the Node.)
func ownedByNode(pod *corev1.Pod, node string) bool {
	if len(pod.OwnerReferences) != 1 {
		return false
	}
	o := pod.OwnerReferences[0]
	return o.APIVersion == "v1" && o.Kind == "Node" && o.Name == node && o.Controller != nil && *o.Controller &&
		(o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion)
}

func nameOf(obj, old runtime.Object) string {
	o := obj
	if o == nil {
		o = old
	}
	acc, err := meta.Accessor(o)
	if err != nil {
		return ""
	}
	return acc.GetName()
}
