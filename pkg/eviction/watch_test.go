package eviction

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestMemoryWatchEdges(t *testing.T) {
	ts, _ := Parse(map[string]string{"memory.available": "100Mi"}, map[string]string{"memory.available": "10%"},
		map[string]string{"memory.available": "1m"}, nil)
	avail, fail := int64(500*mi), false
	w := &memoryWatch{thresholds: ts, read: func() (int64, int64, error) {
		if fail {
			return 0, 0, errors.New("no meminfo")
		}
		return avail, 1000 * mi, nil
	}}
	ctx := context.Background()
	for i, step := range []struct {
		avail   int64
		fail    bool
		crossed bool
	}{
		{500 * mi, false, false},
		{150 * mi, false, false}, // above both (10% of 1000Mi is 100Mi)
		{99 * mi, false, true},   // crossed
		{80 * mi, false, false},  // still below: no new edge
		{0, true, false},         // a failed read changes nothing
		{70 * mi, false, false},
		{300 * mi, false, false}, // recovered
		{90 * mi, false, true},   // crossed again
	} {
		avail, fail = step.avail, step.fail
		if got := w.crossedNow(ctx); got != step.crossed {
			t.Errorf("step %d (%d Mi, fail %v): crossed %v, want %v", i, step.avail/mi, step.fail, got, step.crossed)
		}
	}
}

// A memory threshold crossed between two observations is acted on within the watch's 200 ms, not at the
// next 10 s observation.
func TestRunActsOnACrossingAtOnce(t *testing.T) {
	f := newManager(t, map[string]string{"memory.available": "100Mi"}, nil, nil)
	var mu sync.Mutex
	avail := uint64(500)
	f.pods = []*v1.Pod{pod("hog", 0, 0)}
	f.m.cfg.Summary = func() *statsapi.Summary { mu.Lock(); defer mu.Unlock(); return f.sum }
	f.m.cfg.Gather = func(context.Context) {
		mu.Lock()
		defer mu.Unlock()
		f.sum = summaryOf(f.clock.Now(), avail, 50, map[string]uint64{"hog": 900})
	}
	f.m.cfg.MemoryAvailable = func() (int64, int64, error) {
		mu.Lock()
		defer mu.Unlock()
		return int64(avail * mi), 1000 * mi, nil
	}
	evicted := make(chan string, 1)
	f.m.cfg.Evicter = EvictFunc(func(_ context.Context, p *v1.Pod, _ int64, _ string) error {
		evicted <- p.Name
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.m.Run(ctx)
	// The first observation (a gathering with 500Mi available) is done before the memory drops.
	deadline := time.Now().Add(5 * time.Second)
	for f.m.cfg.Summary() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	avail = 50
	mu.Unlock()
	// Less than the 10 s interval of fake time passes: only the watch can have triggered the eviction.
	for i := 0; i < 40; i++ {
		f.clock.Step(watchInterval)
		select {
		case name := <-evicted:
			if name != "hog" {
				t.Errorf("evicted %s", name)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("no eviction within 8 s of fake time after the crossing")
}
