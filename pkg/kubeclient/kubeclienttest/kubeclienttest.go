package kubeclienttest

import (
	"k8s.io/client-go/kubernetes"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	storagev1 "k8s.io/client-go/kubernetes/typed/storage/v1"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
)

// Wrap returns cs as a kubeclient.Interface.
func Wrap(cs kubernetes.Interface) kubeclient.Interface { return wrapped{cs} }

type wrapped struct{ cs kubernetes.Interface }

func (w wrapped) CoreV1() kubeclient.CoreV1Interface { return core{w.cs.CoreV1()} }
func (w wrapped) CoordinationV1() kubeclient.CoordinationV1Interface {
	return coordination{w.cs.CoordinationV1()}
}
func (w wrapped) AuthenticationV1() kubeclient.AuthenticationV1Interface {
	return authentication{w.cs.AuthenticationV1()}
}
func (w wrapped) AuthorizationV1() kubeclient.AuthorizationV1Interface {
	return authorization{w.cs.AuthorizationV1()}
}
func (w wrapped) StorageV1() kubeclient.StorageV1Interface { return storage{w.cs.StorageV1()} }

func (w wrapped) ResourceV1() kubeclient.ResourceV1Interface { return resources{w.cs.ResourceV1()} }

type resources struct {
	c resourcev1.ResourceV1Interface
}

func (r resources) ResourceClaims(ns string) kubeclient.ResourceClaimInterface {
	return r.c.ResourceClaims(ns)
}
func (r resources) ResourceSlices() kubeclient.ResourceSliceInterface { return r.c.ResourceSlices() }

type storage struct{ c storagev1.StorageV1Interface }

func (s storage) CSINodes() kubeclient.CSINodeInterface     { return s.c.CSINodes() }
func (s storage) CSIDrivers() kubeclient.CSIDriverInterface { return s.c.CSIDrivers() }
func (s storage) VolumeAttachments() kubeclient.VolumeAttachmentInterface {
	return s.c.VolumeAttachments()
}

type core struct{ c corev1.CoreV1Interface }

func (c core) Pods(ns string) kubeclient.PodInterface             { return c.c.Pods(ns) }
func (c core) Nodes() kubeclient.NodeInterface                    { return c.c.Nodes() }
func (c core) ConfigMaps(ns string) kubeclient.ConfigMapInterface { return c.c.ConfigMaps(ns) }
func (c core) Secrets(ns string) kubeclient.SecretInterface       { return c.c.Secrets(ns) }
func (c core) Events(ns string) kubeclient.EventInterface         { return c.c.Events(ns) }
func (c core) Services(ns string) kubeclient.ServiceInterface     { return c.c.Services(ns) }
func (c core) ServiceAccounts(ns string) kubeclient.ServiceAccountInterface {
	return c.c.ServiceAccounts(ns)
}
func (c core) PersistentVolumeClaims(ns string) kubeclient.PersistentVolumeClaimInterface {
	return c.c.PersistentVolumeClaims(ns)
}
func (c core) PersistentVolumes() kubeclient.PersistentVolumeInterface {
	return c.c.PersistentVolumes()
}

type coordination struct {
	c coordinationv1.CoordinationV1Interface
}

func (c coordination) Leases(ns string) kubeclient.LeaseInterface { return c.c.Leases(ns) }

type authentication struct {
	c authenticationv1.AuthenticationV1Interface
}

func (c authentication) TokenReviews() kubeclient.TokenReviewInterface { return c.c.TokenReviews() }

type authorization struct {
	c authorizationv1.AuthorizationV1Interface
}

func (c authorization) SubjectAccessReviews() kubeclient.SubjectAccessReviewInterface {
	return c.c.SubjectAccessReviews()
}
