package config

import (
	"context"
	"runtime"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// gatedCheckpoint is a memCheckpoint whose writes wait while gate is held, and that records them in order.
type gatedCheckpoint struct {
	memCheckpoint
	gate   sync.Mutex
	mu     sync.Mutex
	writes []string
}

func (g *gatedCheckpoint) log(w string) {
	g.mu.Lock()
	g.writes = append(g.writes, w)
	g.mu.Unlock()
}

func (g *gatedCheckpoint) PutPod(p *v1.Pod) error {
	g.gate.Lock()
	defer g.gate.Unlock()
	g.log("put " + p.Name + " " + p.ResourceVersion)
	return g.memCheckpoint.PutPod(p)
}

func (g *gatedCheckpoint) DeletePod(uid types.UID) error {
	g.gate.Lock()
	defer g.gate.Unlock()
	g.log("delete " + string(uid))
	return g.memCheckpoint.DeletePod(uid)
}

// Changes queued while a write is under way are written after it, in order, the latest change of a pod
// replacing one not yet written; flush waits for them. Before run and after it, writes are made at once.
func TestCheckpointWriter(t *testing.T) {
	cp := &gatedCheckpoint{memCheckpoint: memCheckpoint{pods: map[types.UID]*v1.Pod{}}}
	w := newCheckpointWriter(cp)
	ctx := context.Background()
	version := func(name, rv string) *v1.Pod { p := apiPod(name, "n"); p.ResourceVersion = rv; return p }
	w.put(ctx, "uid-a", version("a", "0")) // not running: written at once
	if len(cp.writes) != 1 {
		t.Fatalf("writes before run: %v", cp.writes)
	}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.run(runCtx); close(done) }()
	until := func(cond func() bool) {
		for {
			w.mu.Lock()
			ok := cond()
			w.mu.Unlock()
			if ok {
				return
			}
			runtime.Gosched()
		}
	}
	until(func() bool { return w.running })
	cp.gate.Lock()                         // the next write waits
	w.put(ctx, "uid-a", version("a", "1")) // taken by the writer, which blocks on the gate
	until(func() bool { return w.writing })
	w.put(ctx, "uid-b", version("b", "1"))
	w.put(ctx, "uid-a", version("a", "2"))
	w.put(ctx, "uid-b", nil) // replaces b's put: never written
	w.put(ctx, "uid-a", version("a", "3"))
	cp.gate.Unlock()
	w.flush()
	want := []string{"put a 0", "put a 1", "delete uid-b", "put a 3"}
	cp.mu.Lock()
	got := append([]string(nil), cp.writes...)
	cp.mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("writes %v, want %v", got, want)
		}
	}
	cancel()
	<-done
	w.put(ctx, "uid-c", version("c", "1")) // stopped: at once again
	if names := cp.names(); len(names) != 2 || names[0] != "a" || names[1] != "c" {
		t.Errorf("checkpoint %v, want a and c", names)
	}
}
