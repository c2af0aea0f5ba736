package runtime

import (
	"context"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// recordIndex mirrors the runtime's containerd container records in memory, without their OCI specs, so
// that listing sandboxes and containers (the kubelet's relist, every second) reads nothing from containerd:
// a full List transfers every record with its spec, about 10 KB each.
//
// containerd stays the only place state is kept; the index is rebuilt from it and never written to first.
// It learns of changes in three ways:
//   - every write made through this process's client (create, update, delete) updates it with the record
//     containerd returned, before the write's caller continues, so a list after a write sees the write;
//   - containerd's container events, for writes made by other clients (ctr, another runtime process);
//   - every full List of the namespace (the runtime's reconcile loop runs one every 10 s, and one at start)
//     replaces it, dropping records that are gone.
//
// A read replaces what the index holds if it began after the index stored that (by this process's monotonic
// clock), else only if it is at least as recent by containerd's UpdatedAt (a wall clock, which may step back);
// a deleted ID is remembered for a while so that a read that raced the delete does not bring it back.
type recordIndex struct {
	namespace string

	mu     sync.Mutex
	loaded bool
	recs   map[string]indexed
	gone   map[string]time.Time // deleted IDs and when
	now    func() time.Time

	// metas holds the records' decoded metadata, dropped with the records.
	metas metaCache
	// execs holds what exec needs of each container, dropped with the records.
	execs map[string]*execSpecs
}

type indexed struct {
	rec    containers.Container
	seenAt time.Time // when the index stored it
}

// goneMemory is how long a deleted ID is remembered; far longer than any read of containerd takes.
const goneMemory = time.Minute

func newRecordIndex(namespace string) *recordIndex {
	return &recordIndex{namespace: namespace, recs: map[string]indexed{}, gone: map[string]time.Time{}, now: time.Now,
		execs: map[string]*execSpecs{}}
}

// put stores rec, read from containerd by a call that began at began, unless the index holds a newer version
// or the ID was deleted.
func (x *recordIndex) put(rec containers.Container, began time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.putLocked(rec, began, x.now())
}

func (x *recordIndex) putLocked(rec containers.Container, began, now time.Time) {
	if _, deleted := x.gone[rec.ID]; deleted {
		return
	}
	if cur, ok := x.recs[rec.ID]; ok && !cur.seenAt.Before(began) && cur.rec.UpdatedAt.After(rec.UpdatedAt) {
		return
	}
	rec.Spec = nil
	x.recs[rec.ID] = indexed{rec: rec, seenAt: now}
}

// get returns the indexed record with this ID, without its spec.
func (x *recordIndex) get(id string) (containers.Container, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.recs[id]
	return e.rec, ok
}

// has reports whether the index holds id, with exactly these labels unless labels is nil.
func (x *recordIndex) has(id string, labels map[string]string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.recs[id]
	if !ok || labels == nil {
		return ok
	}
	return maps.Equal(e.rec.Labels, labels)
}

// forget removes a deleted record.
func (x *recordIndex) forget(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.recs, id)
	x.metas.Delete(id)
	delete(x.execs, id)
	x.gone[id] = x.now()
}

// replaceAll makes the index what a full List that started at began returned: records it did not return
// are dropped unless the index learnt of them after the List started.
func (x *recordIndex) replaceAll(recs []containers.Container, began time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	listed := make(map[string]bool, len(recs))
	for _, rec := range recs {
		listed[rec.ID] = true
		x.putLocked(rec, began, now)
	}
	for id, e := range x.recs {
		if !listed[id] && e.seenAt.Before(began) {
			delete(x.recs, id)
			x.metas.Delete(id)
			delete(x.execs, id)
		}
	}
	for id, at := range x.gone {
		if now.Sub(at) > goneMemory {
			delete(x.gone, id)
		}
	}
	x.loaded = true
}

// list returns the records match accepts, ordered by ID, and false if the index has not been loaded yet.
// The records share their label and extension maps with the index: callers only read them.
func (x *recordIndex) list(match func(containers.Container) bool) ([]containers.Container, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.loaded {
		return nil, false
	}
	var out []containers.Container
	for _, e := range x.recs {
		if match(e.rec) {
			out = append(out, e.rec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, true
}

// listRecords returns the runtime's records that match accepts, from the index; a full List of containerd
// loads the index first if it is not loaded yet.
func (r *Runtime) listRecords(ctx context.Context, match func(containers.Container) bool) ([]containers.Container, error) {
	if recs, ok := r.records.list(match); ok {
		return recs, nil
	}
	all, err := r.client.ContainerService().List(ctx)
	if err != nil {
		return nil, err
	}
	var out []containers.Container
	for _, c := range all {
		if match(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// refreshRecord reads a record another client may have written, unless the index already holds it with the
// labels the event carries (this process's own writes are indexed when they return).
func (r *Runtime) refreshRecord(ctx context.Context, id string, labels map[string]string) {
	if r.records.has(id, labels) {
		return
	}
	_, _ = r.client.ContainerService().Get(ctx, id) // indexes the result, or forgets a record that is gone
}

// indexedStore is the containerd container store the runtime's client uses: containerd's own, with every
// result also given to the index.
type indexedStore struct {
	inner containers.Store
	index *recordIndex
}

func (s *indexedStore) ours(ctx context.Context) bool {
	ns, ok := namespaces.Namespace(ctx)
	return ok && ns == s.index.namespace
}

func (s *indexedStore) Get(ctx context.Context, id string) (containers.Container, error) {
	began := s.index.now()
	rec, err := s.inner.Get(ctx, id)
	if s.ours(ctx) {
		switch {
		case err == nil:
			s.index.put(rec, began)
		case errdefs.IsNotFound(err):
			s.index.forget(id)
		}
	}
	return rec, err
}

func (s *indexedStore) List(ctx context.Context, filters ...string) ([]containers.Container, error) {
	began := s.index.now()
	recs, err := s.inner.List(ctx, filters...)
	if err == nil && len(filters) == 0 && s.ours(ctx) {
		s.index.replaceAll(recs, began)
	}
	return recs, err
}

func (s *indexedStore) Create(ctx context.Context, c containers.Container) (containers.Container, error) {
	began := s.index.now()
	rec, err := s.inner.Create(ctx, c)
	if err == nil && s.ours(ctx) {
		s.index.put(rec, began)
	}
	return rec, err
}

func (s *indexedStore) Update(ctx context.Context, c containers.Container, fieldpaths ...string) (containers.Container, error) {
	began := s.index.now()
	rec, err := s.inner.Update(ctx, c, fieldpaths...)
	if s.ours(ctx) {
		switch {
		case err == nil:
			s.index.put(rec, began)
		case errdefs.IsNotFound(err):
			s.index.forget(c.ID)
		}
	}
	return rec, err
}

func (s *indexedStore) Delete(ctx context.Context, id string) error {
	err := s.inner.Delete(ctx, id)
	if (err == nil || errdefs.IsNotFound(err)) && s.ours(ctx) {
		s.index.forget(id)
	}
	return err
}
