package kubeclient

import (
	"context"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is the part of the Kubernetes API the kubelet uses.
type Interface interface {
	CoreV1() CoreV1Interface
	CoordinationV1() CoordinationV1Interface
	AuthenticationV1() AuthenticationV1Interface
	AuthorizationV1() AuthorizationV1Interface
	StorageV1() StorageV1Interface
	ResourceV1() ResourceV1Interface
}

// CoreV1Interface is the kubelet's part of core/v1.
type CoreV1Interface interface {
	Pods(namespace string) PodInterface
	Nodes() NodeInterface
	ConfigMaps(namespace string) ConfigMapInterface
	Secrets(namespace string) SecretInterface
	Events(namespace string) EventInterface
	Services(namespace string) ServiceInterface
	ServiceAccounts(namespace string) ServiceAccountInterface
	PersistentVolumeClaims(namespace string) PersistentVolumeClaimInterface
	PersistentVolumes() PersistentVolumeInterface
}

// ServiceAccountInterface requests tokens of service accounts (serviceaccounts/token, TokenRequest), for the
// token volumes of pods.
type ServiceAccountInterface interface {
	CreateToken(ctx context.Context, serviceAccountName string, tokenRequest *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// CoordinationV1Interface is the kubelet's part of coordination/v1.
type CoordinationV1Interface interface {
	Leases(namespace string) LeaseInterface
}

// AuthenticationV1Interface is the kubelet's part of authentication.k8s.io/v1: it asks the API server who
// a bearer token belongs to (the kubelet endpoint's token authentication).
type AuthenticationV1Interface interface {
	TokenReviews() TokenReviewInterface
}

// AuthorizationV1Interface is the kubelet's part of authorization.k8s.io/v1: it asks the API server whether
// a user may do what a request to the kubelet endpoint does.
type AuthorizationV1Interface interface {
	SubjectAccessReviews() SubjectAccessReviewInterface
}

// StorageV1Interface is the kubelet's part of storage.k8s.io/v1: the node's CSINode, the CSIDrivers its
// volumes name, and the VolumeAttachments of its node.
type StorageV1Interface interface {
	CSINodes() CSINodeInterface
	CSIDrivers() CSIDriverInterface
	VolumeAttachments() VolumeAttachmentInterface
}

// ResourceV1Interface is the kubelet's part of resource.k8s.io/v1: the ResourceClaims its pods use, and the
// ResourceSlices of its node (which it wipes for drivers that went away).
type ResourceV1Interface interface {
	ResourceClaims(namespace string) ResourceClaimInterface
	ResourceSlices() ResourceSliceInterface
}

// ResourceSliceInterface reads and writes ResourceSlices, and deletes them by selector.
type ResourceSliceInterface interface {
	Resource[*resourcev1.ResourceSlice, *resourcev1.ResourceSliceList]
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

// Creator is the one call on a resource that is only ever created (a review answered in its status).
type Creator[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

type (
	// TokenReviewInterface creates TokenReviews.
	TokenReviewInterface = Creator[*authenticationv1.TokenReview]
	// SubjectAccessReviewInterface creates SubjectAccessReviews.
	SubjectAccessReviewInterface = Creator[*authorizationv1.SubjectAccessReview]
)

// Resource is the calls on one resource, with the signatures of client-go's typed clients.
type Resource[T, L any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

type (
	// PodInterface reads and writes pods.
	PodInterface = Resource[*corev1.Pod, *corev1.PodList]
	// NodeInterface reads and writes nodes.
	NodeInterface = Resource[*corev1.Node, *corev1.NodeList]
	// ConfigMapInterface reads config maps.
	ConfigMapInterface = Resource[*corev1.ConfigMap, *corev1.ConfigMapList]
	// SecretInterface reads secrets.
	SecretInterface = Resource[*corev1.Secret, *corev1.SecretList]
	// EventInterface writes events.
	EventInterface = Resource[*corev1.Event, *corev1.EventList]
	// ServiceInterface reads services (the service environment variables of pods).
	ServiceInterface = Resource[*corev1.Service, *corev1.ServiceList]
	// PersistentVolumeClaimInterface reads the claims of pods' volumes.
	PersistentVolumeClaimInterface = Resource[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList]
	// PersistentVolumeInterface reads the volumes claims are bound to.
	PersistentVolumeInterface = Resource[*corev1.PersistentVolume, *corev1.PersistentVolumeList]
	// LeaseInterface reads and writes Leases.
	LeaseInterface = Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
	// CSINodeInterface reads and writes the node's CSINode.
	CSINodeInterface = Resource[*storagev1.CSINode, *storagev1.CSINodeList]
	// CSIDriverInterface reads CSIDrivers.
	CSIDriverInterface = Resource[*storagev1.CSIDriver, *storagev1.CSIDriverList]
	// VolumeAttachmentInterface reads VolumeAttachments.
	VolumeAttachmentInterface = Resource[*storagev1.VolumeAttachment, *storagev1.VolumeAttachmentList]
	// ResourceClaimInterface reads ResourceClaims.
	ResourceClaimInterface = Resource[*resourcev1.ResourceClaim, *resourcev1.ResourceClaimList]
)

// Scheme holds the types this client knows: core/v1, coordination/v1, authentication/v1, authorization/v1,
// storage/v1, and the options types of meta/v1.
var Scheme = runtime.NewScheme()

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	utilruntime.Must(corev1.AddToScheme(Scheme))
	utilruntime.Must(coordinationv1.AddToScheme(Scheme))
	utilruntime.Must(authenticationv1.AddToScheme(Scheme))
	utilruntime.Must(authorizationv1.AddToScheme(Scheme))
	utilruntime.Must(storagev1.AddToScheme(Scheme))
	utilruntime.Must(resourcev1.AddToScheme(Scheme))
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
}

// New returns a client for cfg. Both groups share one HTTP client and, when cfg.QPS is positive, one rate
// limiter, as client-go's clientset does; a negative QPS means no rate limit.
func New(cfg *rest.Config) (Interface, error) {
	c := rest.CopyConfig(cfg)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("kubeclient: burst is required to be greater than 0 when QPS is set")
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	httpClient, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	core, err := restClient(c, httpClient, corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	coord, err := restClient(c, httpClient, coordinationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	authn, err := restClient(c, httpClient, authenticationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	authz, err := restClient(c, httpClient, authorizationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	storage, err := restClient(c, httpClient, storagev1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	res, err := restClient(c, httpClient, resourcev1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return &client{core: coreV1{core}, coordination: coordinationV1{coord},
		authentication: authenticationV1{authn}, authorization: authorizationV1{authz}, storage: storageV1{storage},
		resource: resourceV1{res}}, nil
}

// restClient is a REST client for one group version, set up as client-go's generated clients set theirs up.
func restClient(cfg *rest.Config, h *http.Client, gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
	c := *cfg
	c.GroupVersion = &gv
	c.APIPath = apiPath
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, codecs).WithoutConversion()
	return rest.RESTClientForConfigAndClient(&c, h)
}

type client struct {
	core           coreV1
	coordination   coordinationV1
	authentication authenticationV1
	authorization  authorizationV1
	storage        storageV1
	resource       resourceV1
}

func (c *client) CoreV1() CoreV1Interface                     { return c.core }
func (c *client) CoordinationV1() CoordinationV1Interface     { return c.coordination }
func (c *client) AuthenticationV1() AuthenticationV1Interface { return c.authentication }
func (c *client) AuthorizationV1() AuthorizationV1Interface   { return c.authorization }
func (c *client) StorageV1() StorageV1Interface               { return c.storage }
func (c *client) ResourceV1() ResourceV1Interface             { return c.resource }

type coreV1 struct{ rc rest.Interface }

func (c coreV1) Pods(namespace string) PodInterface {
	return resource(c.rc, "pods", namespace, func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })
}

func (c coreV1) Nodes() NodeInterface {
	return resource(c.rc, "nodes", "", func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

func (c coreV1) ConfigMaps(namespace string) ConfigMapInterface {
	return resource(c.rc, "configmaps", namespace, func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })
}

func (c coreV1) Secrets(namespace string) SecretInterface {
	return resource(c.rc, "secrets", namespace, func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} })
}

func (c coreV1) Events(namespace string) EventInterface {
	return resource(c.rc, "events", namespace, func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
}

func (c coreV1) Services(namespace string) ServiceInterface {
	return resource(c.rc, "services", namespace, func() *corev1.Service { return &corev1.Service{} }, func() *corev1.ServiceList { return &corev1.ServiceList{} })
}

func (c coreV1) PersistentVolumeClaims(namespace string) PersistentVolumeClaimInterface {
	return resource(c.rc, "persistentvolumeclaims", namespace, func() *corev1.PersistentVolumeClaim { return &corev1.PersistentVolumeClaim{} }, func() *corev1.PersistentVolumeClaimList { return &corev1.PersistentVolumeClaimList{} })
}

func (c coreV1) PersistentVolumes() PersistentVolumeInterface {
	return resource(c.rc, "persistentvolumes", "", func() *corev1.PersistentVolume { return &corev1.PersistentVolume{} }, func() *corev1.PersistentVolumeList { return &corev1.PersistentVolumeList{} })
}

func (c coreV1) ServiceAccounts(namespace string) ServiceAccountInterface {
	return serviceAccounts{rc: c.rc, namespace: namespace}
}

type serviceAccounts struct {
	rc        rest.Interface
	namespace string
}

// CreateToken requests a token of the service account, as client-go's typed client does.
func (s serviceAccounts) CreateToken(ctx context.Context, name string, tr *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	out := &authenticationv1.TokenRequest{}
	err := s.rc.Post().Namespace(s.namespace).Resource("serviceaccounts").Name(name).SubResource("token").
		VersionedParams(&opts, parameterCodec).Body(tr).Do(ctx).Into(out)
	return out, err
}

type coordinationV1 struct{ rc rest.Interface }

func (c coordinationV1) Leases(namespace string) LeaseInterface {
	return resource(c.rc, "leases", namespace, func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} })
}

type storageV1 struct{ rc rest.Interface }

func (c storageV1) CSINodes() CSINodeInterface {
	return resource(c.rc, "csinodes", "", func() *storagev1.CSINode { return &storagev1.CSINode{} }, func() *storagev1.CSINodeList { return &storagev1.CSINodeList{} })
}

func (c storageV1) CSIDrivers() CSIDriverInterface {
	return resource(c.rc, "csidrivers", "", func() *storagev1.CSIDriver { return &storagev1.CSIDriver{} }, func() *storagev1.CSIDriverList { return &storagev1.CSIDriverList{} })
}

func (c storageV1) VolumeAttachments() VolumeAttachmentInterface {
	return resource(c.rc, "volumeattachments", "", func() *storagev1.VolumeAttachment { return &storagev1.VolumeAttachment{} }, func() *storagev1.VolumeAttachmentList { return &storagev1.VolumeAttachmentList{} })
}

type resourceV1 struct{ rc rest.Interface }

func (c resourceV1) ResourceClaims(namespace string) ResourceClaimInterface {
	return resource(c.rc, "resourceclaims", namespace, func() *resourcev1.ResourceClaim { return &resourcev1.ResourceClaim{} }, func() *resourcev1.ResourceClaimList { return &resourcev1.ResourceClaimList{} })
}

func (c resourceV1) ResourceSlices() ResourceSliceInterface {
	return gentype.NewClientWithList("resourceslices", c.rc, parameterCodec, "",
		func() *resourcev1.ResourceSlice { return &resourcev1.ResourceSlice{} },
		func() *resourcev1.ResourceSliceList { return &resourcev1.ResourceSliceList{} },
		gentype.PrefersProtobuf[*resourcev1.ResourceSlice]())
}

type authenticationV1 struct{ rc rest.Interface }

func (c authenticationV1) TokenReviews() TokenReviewInterface {
	return gentype.NewClient("tokenreviews", c.rc, parameterCodec, "",
		func() *authenticationv1.TokenReview { return &authenticationv1.TokenReview{} },
		gentype.PrefersProtobuf[*authenticationv1.TokenReview]())
}

type authorizationV1 struct{ rc rest.Interface }

func (c authorizationV1) SubjectAccessReviews() SubjectAccessReviewInterface {
	return gentype.NewClient("subjectaccessreviews", c.rc, parameterCodec, "",
		func() *authorizationv1.SubjectAccessReview { return &authorizationv1.SubjectAccessReview{} },
		gentype.PrefersProtobuf[*authorizationv1.SubjectAccessReview]())
}

// object is what gentype needs of a resource's type.
type object interface {
	runtime.Object
	metav1.Object
}

// resource is client-go's generic client for one resource; the built-in types prefer protobuf, as in the
// generated clients.
func resource[T object, L runtime.Object](rc rest.Interface, name, namespace string, newObj func() T, newList func() L) Resource[T, L] {
	return gentype.NewClientWithList(name, rc, parameterCodec, namespace, newObj, newList, gentype.PrefersProtobuf[T]())
}
