package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// cmCodec stores ConfigMaps only.
type cmCodec struct{}

func (cmCodec) Decode(_ string, raw []byte) (runtime.Object, error) {
	cm := &corev1.ConfigMap{}
	return cm, json.Unmarshal(raw, cm)
}
func (cmCodec) Encode(obj runtime.Object) ([]byte, error) { return json.Marshal(obj) }
func (cmCodec) Index(_ string, obj runtime.Object) (labels.Set, fields.Set) {
	cm := obj.(*corev1.ConfigMap)
	return cm.Labels, fields.Set{"metadata.name": cm.Name}
}

func put(name, val string) UpdateFunc {
	return func(cur runtime.Object) (runtime.Object, error) {
		cm := &corev1.ConfigMap{}
		if cur != nil {
			cm = cur.(*corev1.ConfigMap)
		}
		cm.Name, cm.Data = name, map[string]string{"v": val}
		return cm, nil
	}
}

func TestConcurrentWritesOrderedAndDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, cmCodec{}, Options{Window: 1000})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch("configmaps/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := fmt.Sprintf("c%d", i%8)
			if _, _, err := s.Update(context.Background(), "configmaps/ns/"+name, put(name, fmt.Sprint(i))); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	var last uint64
	seen := 0
	for seen < 64 {
		evs, err := w.Next(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Object.RV <= last {
				t.Fatalf("events out of order: %d after %d", ev.Object.RV, last)
			}
			last = ev.Object.RV
			seen++
		}
	}
	objs, rv := s.List("configmaps/ns/")
	if len(objs) != 8 || rv != last {
		t.Fatalf("list: %d objects at %d, want 8 at %d", len(objs), rv, last)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path, cmCodec{}, Options{Window: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	objs2, rv2 := s2.List("configmaps/")
	if len(objs2) != 8 || rv2 != rv {
		t.Fatalf("after reopen: %d objects at %d, want 8 at %d", len(objs2), rv2, rv)
	}
	if _, err := s2.Watch("configmaps/", rv-1); err != ErrTooOld {
		t.Fatalf("watch before reopen: want ErrTooOld, got %v", err)
	}
	o, _, err := s2.Update(context.Background(), "configmaps/ns/c0", func(runtime.Object) (runtime.Object, error) { return nil, nil })
	if err != nil || o.RV != rv+1 {
		t.Fatalf("delete after reopen: %v rv %d", err, o.RV)
	}
	w2, _ := s2.Watch("configmaps/", rv)
	evs, _ := w2.Next(context.Background(), nil)
	if len(evs) != 1 || evs[0].Type != watch.Deleted || evs[0].Prev == nil {
		t.Fatalf("delete event: %+v", evs)
	}
}

func TestNoOpUpdateKeepsVersion(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, _, err := s.Update(context.Background(), "configmaps/ns/x", put("x", "1"))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.Update(context.Background(), "configmaps/ns/x", put("x", "1"))
	if err != nil || b.RV != a.RV {
		t.Fatalf("no-op update changed version %d -> %d (%v)", a.RV, b.RV, err)
	}
}

func TestExactSpanIgnoresKeysSharingItsPrefix(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), cmCodec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, name := range []string{"a", "ab", "a-b"} {
		if _, _, err := s.Update(ctx, "configmaps/ns/"+name, put(name, "1")); err != nil {
			t.Fatal(err)
		}
	}
	objs, w := s.SnapshotSpan(Only("configmaps/ns/a"))
	if len(objs) != 1 || objs[0].Key != "configmaps/ns/a" {
		t.Fatalf("snapshot of one key: %d objects", len(objs))
	}
	for _, name := range []string{"ab", "a-b", "a"} {
		if _, _, err := s.Update(ctx, "configmaps/ns/"+name, put(name, "2")); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := w.Next(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Object.Key != "configmaps/ns/a" {
		t.Fatalf("events of one key: %+v", evs)
	}
}
