package config

import (
	"context"
	"slices"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// gatedCheckpoint is a memCheckpoint that records its writes in order and can hold them: a write says it
// began on entered (while its buffer lasts), then waits while gate is held.
type gatedCheckpoint struct {
	memCheckpoint
	gate    sync.Mutex
	entered chan string
	mu      sync.Mutex
	writes  []string
}

func (g *gatedCheckpoint) wrote(w string) {
	select {
	case g.entered <- w:
	default:
	}
	g.gate.Lock()
	defer g.gate.Unlock()
	g.mu.Lock()
	g.writes = append(g.writes, w)
	g.mu.Unlock()
}

func (g *gatedCheckpoint) PutPod(p *v1.Pod) error {
	g.wrote("put " + p.Name + " " + p.ResourceVersion)
	return g.memCheckpoint.PutPod(p)
}

func (g *gatedCheckpoint) DeletePod(uid types.UID) error {
	g.wrote("delete " + string(uid))
	return g.memCheckpoint.DeletePod(uid)
}

// Changes queued while a write is under way are written after it, in order, the latest change of a pod
// replacing one not yet written; what is still queued when the writer stops is written before it returns.
// Before run and after it, writes are made at once.
func TestCheckpointWriter(t *testing.T) {
	cp := &gatedCheckpoint{memCheckpoint: memCheckpoint{pods: map[types.UID]*v1.Pod{}}, entered: make(chan string, 8)}
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
	for running := false; !running; {
		w.mu.Lock()
		running = w.running
		w.mu.Unlock()
	}
	cp.gate.Lock()                         // the writer's next write waits
	w.put(ctx, "uid-a", version("a", "1")) // taken by the writer
	if first, second := <-cp.entered, <-cp.entered; first != "put a 0" || second != "put a 1" {
		t.Fatalf("writes begun: %q, %q", first, second)
	}
	w.put(ctx, "uid-b", version("b", "1"))
	w.put(ctx, "uid-a", version("a", "2"))
	w.put(ctx, "uid-b", nil) // replaces b's put: never written
	w.put(ctx, "uid-a", version("a", "3"))
	cancel() // stopping: what is queued is still written
	cp.gate.Unlock()
	<-done
	want := []string{"put a 0", "put a 1", "delete uid-b", "put a 3"}
	if !slices.Equal(cp.writes, want) {
		t.Fatalf("writes %v, want %v", cp.writes, want)
	}
	w.put(ctx, "uid-c", version("c", "1")) // stopped: at once again
	if names := cp.names(); len(names) != 2 || names[0] != "a" || names[1] != "c" {
		t.Errorf("checkpoint %v, want a and c", names)
	}
}
