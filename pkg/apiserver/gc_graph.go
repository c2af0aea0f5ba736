package apiserver

import (
	"bytes"
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// objMeta is the part of a stored object's metadata the garbage collector
// reads, decoded without the rest of the object.
type objMeta struct {
	Metadata struct {
		Name              string                  `json:"name"`
		Namespace         string                  `json:"namespace"`
		UID               string                  `json:"uid"`
		ResourceVersion   string                  `json:"resourceVersion"`
		DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
		Finalizers        []string                `json:"finalizers"`
		OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
}

func parseMeta(raw []byte) (*objMeta, error) {
	m := &objMeta{}
	return m, json.Unmarshal(raw, m)
}

func (m *objMeta) hasFinalizer(f string) bool {
	for _, x := range m.Metadata.Finalizers {
		if x == f {
			return true
		}
	}
	return false
}

// deletingWithGC reports whether the object waits for the garbage collector:
// being deleted with the orphan or foregroundDeletion finalizer.
func (m *objMeta) deletingWithGC() bool {
	return m.Metadata.DeletionTimestamp != nil &&
		(m.hasFinalizer(metav1.FinalizerOrphanDependents) || m.hasFinalizer(metav1.FinalizerDeleteDependents))
}

var (
	ownerReferencesJSON = []byte(`"ownerReferences":`)
	finalizersJSON      = []byte(`"finalizers":`)
)

// ownerGraph is the garbage collector's view of the store, kept from its
// events: which objects name owners (by the owners' storage keys), which are
// being deleted with a collector finalizer, and which keys need a visit.
// It is used by the control loop's goroutine only.
type ownerGraph struct {
	kinds      map[schema.GroupKind]*registry.Resource // owner kinds, stored form
	owners     map[string][]string                     // dependent key -> owner keys
	dependents map[string]map[string]bool              // owner key -> dependent keys
	finalizing map[string]bool                         // deleting with orphan or foregroundDeletion
	pending    map[string]bool                         // keys to visit
	retry      map[string]bool                         // keys whose visit failed: visited on the periodic pass
}

func newOwnerGraph(reg *registry.Registry) *ownerGraph {
	g := &ownerGraph{kinds: map[schema.GroupKind]*registry.Resource{}}
	for _, r := range reg.All() {
		if stored, ok := reg.ForStorage(r.Storage); ok {
			g.kinds[schema.GroupKind{Group: r.Group, Kind: r.Kind}] = stored
		}
	}
	g.reset()
	return g
}

func (g *ownerGraph) reset() {
	g.owners = map[string][]string{}
	g.dependents = map[string]map[string]bool{}
	g.finalizing = map[string]bool{}
	g.pending = map[string]bool{}
	g.retry = map[string]bool{}
}

// rebuild indexes every stored object and marks every indexed one for a visit.
func (g *ownerGraph) rebuild(store *storage.Store) {
	g.reset()
	seen := map[string]bool{}
	for _, r := range g.kinds {
		if seen[r.Storage] {
			continue
		}
		seen[r.Storage] = true
		objs, _ := store.List(r.Storage + "/")
		for _, o := range objs {
			g.observe(storage.Event{Type: watch.Added, Object: o})
		}
	}
}

// ownerKey returns the storage key of the owner ref names for a dependent in
// namespace ns; false when the kind is not served here or cannot own it (a
// namespaced owner of a cluster-scoped dependent, as upstream).
func (g *ownerGraph) ownerKey(ns string, ref metav1.OwnerReference) (string, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", false
	}
	r, ok := g.kinds[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
	if !ok || (r.Namespaced && ns == "") {
		return "", false
	}
	if !r.Namespaced {
		ns = ""
	}
	return r.Key(ns, ref.Name), true
}

// observe updates the graph with one change and marks the keys it concerns.
func (g *ownerGraph) observe(ev storage.Event) {
	key := ev.Object.Key
	wasFinalizing := g.finalizing[key]
	g.unlink(key)
	delete(g.finalizing, key)
	if len(g.dependents[key]) > 0 { // an owner changed: its dependents may be orphans now
		g.pending[key] = true
		for d := range g.dependents[key] {
			g.pending[d] = true
		}
	}
	if wasFinalizing {
		g.pending[key] = true
	}
	raw := ev.Object.Raw
	if ev.Type == watch.Deleted || (!bytes.Contains(raw, ownerReferencesJSON) && !bytes.Contains(raw, finalizersJSON)) {
		return
	}
	m, err := parseMeta(raw)
	if err != nil {
		return
	}
	if m.deletingWithGC() {
		g.finalizing[key] = true
		g.pending[key] = true
	}
	if len(m.Metadata.OwnerReferences) == 0 {
		return
	}
	ns := namespaceOfKey(key)
	var keys []string
	for _, ref := range m.Metadata.OwnerReferences {
		if k, ok := g.ownerKey(ns, ref); ok {
			keys = append(keys, k)
			if g.dependents[k] == nil {
				g.dependents[k] = map[string]bool{}
			}
			g.dependents[k][key] = true
		}
	}
	if len(keys) > 0 { // owners of kinds not served here are never collected
		g.owners[key] = keys
		g.pending[key] = true
	}
}

// unlink removes key as a dependent, marking its former owners (a foreground
// owner may have waited for it).
func (g *ownerGraph) unlink(key string) {
	keys, ok := g.owners[key]
	if !ok {
		return
	}
	for _, o := range keys {
		delete(g.dependents[o], key)
		if len(g.dependents[o]) == 0 {
			delete(g.dependents, o)
		}
		if g.finalizing[o] {
			g.pending[o] = true
		}
	}
	delete(g.owners, key)
}

// requeue makes the keys whose visit failed due again.
func (g *ownerGraph) requeue() {
	for k := range g.retry {
		g.pending[k] = true
	}
	clear(g.retry)
}

// take returns and clears the keys to visit.
func (g *ownerGraph) take() []string {
	out := make([]string, 0, len(g.pending))
	for k := range g.pending {
		out = append(out, k)
	}
	clear(g.pending)
	return out
}

// namespaceOfKey returns the namespace part of a storage key.
func namespaceOfKey(key string) string {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[1]
}

// nameOfKey returns the name part of a storage key.
func nameOfKey(key string) string {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}
