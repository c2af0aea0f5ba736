package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"
)

// memStore is an in-memory containerd container store, stamping UpdatedAt as containerd does, from a wall
// clock that may be stepped.
type memStore struct {
	mu   sync.Mutex
	recs map[string]containers.Container
	now  func() time.Time
	step time.Duration
	// beforeUpdate, when set, runs before each Update (outside the lock); its error fails the update.
	beforeUpdate func(id string) error
}

func (s *memStore) Get(_ context.Context, id string) (containers.Container, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.recs[id]
	if !ok {
		return containers.Container{}, fmt.Errorf("container %q: %w", id, errdefs.ErrNotFound)
	}
	return c, nil
}

func (s *memStore) List(_ context.Context, fs ...string) ([]containers.Container, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []containers.Container
	for _, c := range s.recs {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (s *memStore) Create(_ context.Context, c containers.Container) (containers.Container, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.CreatedAt, c.UpdatedAt = s.now().Add(s.step), s.now().Add(s.step)
	s.recs[c.ID] = c
	return c, nil
}

// Update sets the labels as containerd does: each one a path names ("labels.<key>"), or all of them (the path
// "labels", or no path).
func (s *memStore) Update(_ context.Context, c containers.Container, paths ...string) (containers.Container, error) {
	if s.beforeUpdate != nil {
		if err := s.beforeUpdate(c.ID); err != nil {
			return containers.Container{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.recs[c.ID]
	if !ok {
		return containers.Container{}, errdefs.ErrNotFound
	}
	labels := maps.Clone(cur.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for _, p := range paths {
		if k, ok := strings.CutPrefix(p, "labels."); ok {
			labels[k] = c.Labels[k]
		}
	}
	if len(paths) == 0 || slices.Contains(paths, "labels") {
		labels = c.Labels
	}
	cur.Labels = labels
	cur.UpdatedAt = s.now().Add(s.step)
	s.recs[c.ID] = cur
	return cur, nil
}

func (s *memStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recs[id]; !ok {
		return errdefs.ErrNotFound
	}
	delete(s.recs, id)
	return nil
}

// fakeTime is a clock that moves one millisecond each time it is read.
type fakeTime struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeTime) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(time.Millisecond)
	return f.t
}

func newIndexedStore(t *testing.T) (*indexedStore, *memStore, *fakeTime, context.Context) {
	t.Helper()
	clk := &fakeTime{t: time.Unix(1000, 0)}
	mem := &memStore{recs: map[string]containers.Container{}, now: clk.now}
	idx := newRecordIndex("ns")
	idx.now = clk.now
	return &indexedStore{inner: mem, index: idx}, mem, clk, namespaces.WithNamespace(context.Background(), "ns")
}

func ids(recs []containers.Container) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.ID+"="+r.Labels["state"])
	}
	return out
}

func all(containers.Container) bool { return true }

func TestRecordIndexFollowsWritesThroughTheStore(t *testing.T) {
	s, _, _, ctx := newIndexedStore(t)
	if _, ok := s.index.list(all); ok {
		t.Fatal("an index never loaded must not answer")
	}
	if _, err := s.List(ctx); err != nil { // the runtime's first reconcile
		t.Fatal(err)
	}
	spec, _ := typeurl.MarshalAny(&sandboxMeta{})
	for _, id := range []string{"b", "a", "c"} {
		if _, err := s.Create(ctx, containers.Container{ID: id, Labels: map[string]string{"state": "created"}, Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Update(ctx, containers.Container{ID: "a", Labels: map[string]string{"state": "running"}}, "labels"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	got, ok := s.index.list(all)
	if !ok || fmt.Sprint(ids(got)) != "[a=running b=created]" {
		t.Fatalf("index after writes: %v (loaded %v), want [a=running b=created]", ids(got), ok)
	}
	if got[0].Spec != nil {
		t.Error("the index keeps specs; it should drop them")
	}
	// A write in another namespace is not this runtime's.
	other := namespaces.WithNamespace(context.Background(), "other")
	if _, err := s.Create(other, containers.Container{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.index.list(all); len(got) != 2 {
		t.Errorf("a record of another namespace was indexed: %v", ids(got))
	}
}

func TestRecordIndexNeverGoesBack(t *testing.T) {
	s, mem, clk, ctx := newIndexedStore(t)
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, containers.Container{ID: "a", Labels: map[string]string{"state": "created"}}); err != nil {
		t.Fatal(err)
	}
	readBegan := clk.now()
	stale, _ := mem.Get(ctx, "a") // a read that started before the update
	if _, err := s.Update(ctx, containers.Container{ID: "a", Labels: map[string]string{"state": "exited"}}); err != nil {
		t.Fatal(err)
	}
	s.index.put(stale, readBegan) // ...and returned after it
	if got, _ := s.index.list(all); fmt.Sprint(ids(got)) != "[a=exited]" {
		t.Errorf("an older read replaced a newer record: %v", ids(got))
	}

	beforeDelete, _ := mem.Get(ctx, "a")
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	s.index.put(beforeDelete, clk.now()) // a read that raced the delete
	s.index.replaceAll([]containers.Container{beforeDelete}, time.Unix(0, 0))
	if got, _ := s.index.list(all); len(got) != 0 {
		t.Errorf("a deleted record came back: %v", ids(got))
	}
}

func TestRecordIndexFullListDropsWhatIsGone(t *testing.T) {
	s, mem, clk, ctx := newIndexedStore(t)
	for _, id := range []string{"a", "b"} {
		if _, err := s.Create(ctx, containers.Container{ID: id, Labels: map[string]string{"state": "created"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Another client removes b and adds c, and this process misses both events.
	delete(mem.recs, "b")
	if _, err := mem.Create(ctx, containers.Container{ID: "c", Labels: map[string]string{"state": "created"}}); err != nil {
		t.Fatal(err)
	}
	// A full list starts; while it runs, this process creates d, which the list does not see.
	began := clk.now()
	listed, _ := mem.List(ctx)
	if _, err := s.Create(ctx, containers.Container{ID: "d", Labels: map[string]string{"state": "created"}}); err != nil {
		t.Fatal(err)
	}
	s.index.replaceAll(listed, began)
	got, ok := s.index.list(all)
	if !ok || fmt.Sprint(ids(got)) != "[a=created c=created d=created]" {
		t.Errorf("after a full list: %v, want [a=created c=created d=created]", ids(got))
	}
}

func TestRecordIndexGetForgetsWhatIsGone(t *testing.T) {
	s, mem, _, ctx := newIndexedStore(t)
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, containers.Container{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	delete(mem.recs, "a")
	if _, err := s.Get(ctx, "a"); !errdefs.IsNotFound(err) {
		t.Fatalf("Get of a removed record: %v", err)
	}
	if s.index.has("a", nil) {
		t.Error("a record containerd no longer has is still indexed")
	}
	if _, err := mem.Create(ctx, containers.Container{ID: "e", Labels: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if s.index.has("e", nil) {
		t.Fatal("a record written by another client is indexed before anything read it")
	}
	if _, err := s.Get(ctx, "e"); err != nil { // what the container-create event handler does
		t.Fatal(err)
	}
	if !s.index.has("e", map[string]string{"k": "v"}) || s.index.has("e", map[string]string{"k": "w"}) {
		t.Error("has does not compare labels")
	}
}

func TestRecordIndexFollowsAWallClockSteppedBack(t *testing.T) {
	s, mem, _, ctx := newIndexedStore(t)
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, containers.Container{ID: "a", Labels: map[string]string{"state": "running"}}); err != nil {
		t.Fatal(err)
	}
	mem.step = -time.Hour // containerd's clock steps back: later records carry older UpdatedAt
	if _, err := s.Update(ctx, containers.Container{ID: "a", Labels: map[string]string{"state": "exited"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.index.list(all); fmt.Sprint(ids(got)) != "[a=exited]" {
		t.Errorf("after an update with an older UpdatedAt: %v, want [a=exited]", ids(got))
	}
	// An update by another client, seen through a full list.
	mem.mu.Lock()
	r := mem.recs["a"]
	r.Labels = map[string]string{"state": "removed-by-ctr"}
	r.UpdatedAt = r.UpdatedAt.Add(-time.Hour)
	mem.recs["a"] = r
	mem.mu.Unlock()
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.index.list(all); fmt.Sprint(ids(got)) != "[a=removed-by-ctr]" {
		t.Errorf("after a full list: %v, want [a=removed-by-ctr]", ids(got))
	}
}

func TestRecordIndexDropsDecodedMetadataWithTheRecord(t *testing.T) {
	s, mem, _, ctx := newIndexedStore(t)
	ext, err := typeurl.MarshalAny(&containerMeta{SandboxID: "sb"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		rec, err := s.Create(ctx, containers.Container{ID: id, Extensions: map[string]typeurl.Any{extensionMeta: ext}})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := s.index.metas.container(rec); err != nil || m.SandboxID != "sb" {
			t.Fatalf("decode %s: %+v %v", id, m, err)
		}
	}
	if err := s.Delete(ctx, "a"); err != nil { // through this runtime
		t.Fatal(err)
	}
	delete(mem.recs, "b") // behind its back: the next full list finds it gone
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, ok := s.index.metas.m.Load(id); ok {
			t.Errorf("decoded metadata of removed record %s kept", id)
		}
	}
}

func TestRecordIndexExecSpecsGoWithTheRecord(t *testing.T) {
	x := newRecordIndex("ns")
	proc := &specs.Process{Args: []string{"sleep", "inf"}}
	a := &anypb.Any{TypeUrl: "probe"}
	x.putExecSpec("gone", proc, "cat\x00/tmp/ready", a)
	if got, p := x.execSpec("gone", "cat\x00/tmp/ready"); got != nil || p != nil {
		t.Fatalf("a container the index does not hold was cached: %v %v", got, p)
	}
	x.put(containers.Container{ID: "c1"}, time.Now())
	x.putExecSpec("c1", proc, "cat\x00/tmp/ready", a)
	if got, p := x.execSpec("c1", "cat\x00/tmp/ready"); got != a || p != proc {
		t.Fatalf("execSpec = %v, %v; want the cached spec and process", got, p)
	}
	if got, p := x.execSpec("c1", "other"); got != nil || p != proc {
		t.Fatalf("another command: %v, %v; want no spec but the process", got, p)
	}
	for i := range maxCachedCommands + 3 {
		x.putExecSpec("c1", proc, fmt.Sprint(i), a)
	}
	if n := len(x.execs["c1"].byCmd); n > maxCachedCommands {
		t.Fatalf("%d commands cached, want at most %d", n, maxCachedCommands)
	}
	x.forget("c1")
	if got, p := x.execSpec("c1", "cat\x00/tmp/ready"); got != nil || p != nil {
		t.Fatalf("forgotten container still cached: %v %v", got, p)
	}
	x.put(containers.Container{ID: "c2"}, time.Now())
	x.putExecSpec("c2", proc, "k", a)
	x.replaceAll(nil, time.Now().Add(time.Second))
	if _, p := x.execSpec("c2", "k"); p != nil {
		t.Fatal("a full list without the container kept its exec specs")
	}
}
