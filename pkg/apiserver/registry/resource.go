package registry

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Strategy holds a kind's rules. Implementations are stateless.
type Strategy interface {
	// PrepareForCreate clears what a client may not set on create and applies
	// the kind's defaults.
	PrepareForCreate(obj runtime.Object)
	// PrepareForUpdate carries over from old what an update of the main
	// resource may not change (such as status).
	PrepareForUpdate(obj, old runtime.Object)
	Validate(obj runtime.Object) field.ErrorList
	ValidateUpdate(obj, old runtime.Object) field.ErrorList
	// Fields returns the values of the kind's selectable fields.
	Fields(obj runtime.Object) fields.Set
}

// StatusStrategy is implemented by kinds with a status subresource.
type StatusStrategy interface {
	// CopyStatus sets dst's status to src's.
	CopyStatus(dst, src runtime.Object)
	ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList
}

// Converter maps a resource served in one version onto the storage form of
// another (events.k8s.io/v1 Events are stored as core/v1 Events).
type Converter interface {
	ToStorage(obj runtime.Object) (runtime.Object, error)
	FromStorage(obj runtime.Object) (runtime.Object, error)
	// FieldLabel maps a field selector label of the served version onto the
	// stored one; ok is false for an unsupported label.
	FieldLabel(label string) (string, bool)
}

// Resource is one served resource.
type Resource struct {
	Group      string
	Version    string
	Name       string // plural, e.g. "pods"
	Singular   string
	Kind       string
	Namespaced bool
	ShortNames []string
	Categories []string
	// Subresources served besides the main resource, e.g. "status".
	Subresources []string
	// Storage is the key prefix objects are stored under (the resource name of
	// the stored form).
	Storage string
	New     func() runtime.Object
	NewList func() runtime.Object
	// StoredNew returns a new object of the stored form when it differs from
	// the served one (Converter set).
	StoredNew func() runtime.Object
	// Strategy acts on the stored form.
	Strategy Strategy
	// AllowCreateOnUpdate lets a PUT create a missing object.
	AllowCreateOnUpdate bool
	Converter           Converter // nil when served in its stored form
	// SerializeWrites makes creates and updates of the resource run one at a
	// time, so that admission may allocate from what is stored (Services'
	// cluster IPs and node ports).
	SerializeWrites bool
	// CreateOnly marks a resource that is not stored: a create is answered in
	// its response (the token and access reviews). It has no Storage, NewList
	// or Strategy.
	CreateOnly bool
}

// GroupVersion returns the resource's group and version.
func (r *Resource) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}
}

// GroupResource returns the resource's group and name, as errors name it.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Name}
}

// GVK returns the kind's group, version and kind.
func (r *Resource) GVK() schema.GroupVersionKind { return r.GroupVersion().WithKind(r.Kind) }

// NewStored returns a new object of the stored form.
func (r *Resource) NewStored() runtime.Object {
	if r.StoredNew != nil {
		return r.StoredNew()
	}
	return r.New()
}

// HasSubresource reports whether sub is served.
func (r *Resource) HasSubresource(sub string) bool {
	for _, s := range r.Subresources {
		if s == sub {
			return true
		}
	}
	return false
}

// Stored reports whether the resource's objects are kept in the store under
// their own Storage prefix (false for create-only resources and for versions
// served through a Converter).
func (r *Resource) Stored() bool { return !r.CreateOnly && r.Converter == nil }

// Verbs returns the discovery verbs of the main resource.
func (r *Resource) Verbs() []string {
	if r.CreateOnly {
		return []string{"create"}
	}
	return []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
}

// Key returns the storage key of a namespaced or cluster-scoped object.
func (r *Resource) Key(namespace, name string) string {
	return r.Storage + "/" + namespace + "/" + name
}

// Prefix returns the storage key prefix listing a namespace (all namespaces
// when namespace is empty).
func (r *Resource) Prefix(namespace string) string {
	if namespace == "" {
		return r.Storage + "/"
	}
	return r.Storage + "/" + namespace + "/"
}

// Registry is the table of served resources.
type Registry struct {
	list    []*Resource
	byPath  map[schema.GroupVersionResource]*Resource
	storage map[string]*Resource
}

// New returns the registry of every resource the apiserver serves.
func New() *Registry {
	reg := &Registry{byPath: map[schema.GroupVersionResource]*Resource{}, storage: map[string]*Resource{}}
	for _, r := range append(resources(), reviews()...) {
		reg.list = append(reg.list, r)
		reg.byPath[schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Name}] = r
		if r.Stored() {
			reg.storage[r.Storage] = r
		}
	}
	return reg
}

// All returns every resource, in discovery order.
func (g *Registry) All() []*Resource { return g.list }

// Lookup returns the resource served at group/version/name.
func (g *Registry) Lookup(group, version, name string) (*Resource, bool) {
	r, ok := g.byPath[schema.GroupVersionResource{Group: group, Version: version, Resource: name}]
	return r, ok
}

// ForStorage returns the resource whose stored form lives under prefix.
func (g *Registry) ForStorage(prefix string) (*Resource, bool) {
	r, ok := g.storage[prefix]
	return r, ok
}

// GroupVersions returns the served group/versions, core first.
func (g *Registry) GroupVersions() []schema.GroupVersion {
	var out []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	for _, r := range g.list {
		gv := r.GroupVersion()
		if !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	return out
}
