package podsync

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/pleg"
)

// fakeSyncer records what the workers ask for; syncPod blocks while gate is held.
type fakeSyncer struct {
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{}
	// canceled, when set, holds a canceled sync until it is closed (the updates that canceled it all
	// queued by then).
	canceled chan struct{}
	synced   []string // container image of each synced spec, or the state name
	terminal bool
}

func (f *fakeSyncer) record(s string) {
	f.mu.Lock()
	f.synced = append(f.synced, s)
	f.mu.Unlock()
}

func (f *fakeSyncer) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.synced...)
}

func (f *fakeSyncer) syncPod(ctx context.Context, pod *v1.Pod, _ *pleg.PodState) (syncOutcome, error) {
	if f.entered != nil {
		select {
		case f.entered <- struct{}{}:
		default:
		}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			f.record("canceled:" + pod.Spec.Containers[0].Image)
			if f.canceled != nil {
				<-f.canceled
			}
			return syncOutcome{}, ctx.Err()
		}
	}
	f.record("sync:" + pod.Spec.Containers[0].Image)
	return syncOutcome{terminal: f.terminal}, nil
}

func (f *fakeSyncer) syncTerminatingPod(_ context.Context, pod *v1.Pod, _ *pleg.PodState, grace *int64) error {
	g := "default"
	if grace != nil {
		g = time.Duration(*grace * int64(time.Second)).String()
	}
	f.record("terminating:" + g)
	return nil
}

func (f *fakeSyncer) syncTerminatedPod(_ context.Context, _ *v1.Pod, _ *pleg.PodState, deleted bool) error {
	if deleted {
		f.record("terminated:deleted")
	} else {
		f.record("terminated")
	}
	return nil
}

// fakeStates is a podStateSource whose cache is always fresh.
type fakeStates struct{ cache *pleg.Cache }

func newFakeStates() *fakeStates {
	c := pleg.NewCache()
	c.UpdateTime(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	return &fakeStates{cache: c}
}

func (f *fakeStates) Cache() *pleg.Cache                         { return f.cache }
func (f *fakeStates) RelistPod(context.Context, types.UID) error { return nil }

func podWithImage(image string) *v1.Pod {
	p := newPod("u1", "p", "c")
	p.Spec.Containers[0].Image = image
	return p
}

func TestWorkerCoalescesUpdates(t *testing.T) {
	f := &fakeSyncer{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	w := newPodWorkers(f, newFakeStates(), testclock.NewFakeClock(t0), DefaultSyncFrequency)
	defer w.stopAll()
	w.UpdatePod(podUpdate{typ: updateSync, pod: podWithImage("v1")})
	<-f.entered // v1 is syncing and blocked
	for _, img := range []string{"v2", "v3", "v4"} {
		w.UpdatePod(podUpdate{typ: updateSync, pod: podWithImage(img)})
	}
	close(f.gate)
	eventually(t, "two syncs", func() bool { return len(f.log()) == 2 })
	time.Sleep(20 * time.Millisecond)
	got := f.log()
	if len(got) != 2 || got[0] != "sync:v1" || got[1] != "sync:v4" {
		t.Fatalf("syncs %v, want v1 then only the latest v4", got)
	}
}

func TestWorkerKillCancelsSyncAndTerminates(t *testing.T) {
	f := &fakeSyncer{gate: make(chan struct{}), entered: make(chan struct{}, 1), canceled: make(chan struct{})}
	w := newPodWorkers(f, newFakeStates(), testclock.NewFakeClock(t0), DefaultSyncFrequency)
	defer w.stopAll()
	w.UpdatePod(podUpdate{typ: updateSync, pod: podWithImage("v1")})
	<-f.entered
	long, short := int64(30), int64(5)
	// Both kills arrive while the canceled sync is still winding down: the termination takes the shorter
	// grace period and the deletion.
	w.UpdatePod(podUpdate{typ: updateKill, pod: podWithImage("v1"), grace: &long})
	w.UpdatePod(podUpdate{typ: updateKill, pod: podWithImage("v1"), grace: &short, deleted: true})
	w.UpdatePod(podUpdate{typ: updateSync, pod: podWithImage("v2")}) // ignored: terminating is for good
	close(f.canceled)
	eventually(t, "finished", func() bool {
		s, _ := w.state("u1")
		return s == stateFinished
	})
	want := []string{"canceled:v1", "terminating:5s", "terminated:deleted"}
	got := f.log()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	w.forget("u1")
	if _, ok := w.state("u1"); ok {
		t.Fatal("finished worker not forgotten")
	}
}

func TestWorkerTerminalPodStopsAndWaitsForDeletion(t *testing.T) {
	f := &fakeSyncer{terminal: true}
	w := newPodWorkers(f, newFakeStates(), testclock.NewFakeClock(t0), DefaultSyncFrequency)
	defer w.stopAll()
	w.UpdatePod(podUpdate{typ: updateSync, pod: podWithImage("v1")})
	eventually(t, "terminated", func() bool { return len(f.log()) == 3 })
	w.UpdatePod(podUpdate{typ: updateSync, pod: podWithImage("v1")}) // nothing more to do
	time.Sleep(20 * time.Millisecond)
	if s, _ := w.state("u1"); s != stateTerminated || len(f.log()) != 3 {
		t.Fatalf("state %v, syncs %v", s, f.log())
	}
	w.UpdatePod(podUpdate{typ: updateKill, pod: podWithImage("v1"), deleted: true})
	eventually(t, "cleaned up", func() bool { return len(f.log()) == 4 })
	if got := f.log(); got[0] != "sync:v1" || got[1] != "terminating:default" || got[2] != "terminated" || got[3] != "terminated:deleted" {
		t.Fatalf("syncs %v", got)
	}
}

func TestWorkersIndependent(t *testing.T) {
	// One pod stuck in its sync does not delay another pod.
	f := &fakeSyncer{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	fast := &fakeSyncer{}
	router := &routingSyncer{by: map[types.UID]podSyncer{"slow": f, "fast": fast}}
	w := newPodWorkers(router, newFakeStates(), testclock.NewFakeClock(t0), DefaultSyncFrequency)
	defer func() { close(f.gate); w.stopAll() }()
	slow := podWithImage("slow")
	slow.UID = "slow"
	w.UpdatePod(podUpdate{typ: updateSync, pod: slow})
	<-f.entered
	other := podWithImage("fast")
	other.UID = "fast"
	w.UpdatePod(podUpdate{typ: updateSync, pod: other})
	eventually(t, "fast pod synced", func() bool { return len(fast.log()) == 1 })
}

type routingSyncer struct{ by map[types.UID]podSyncer }

func (r *routingSyncer) syncPod(ctx context.Context, pod *v1.Pod, s *pleg.PodState) (syncOutcome, error) {
	return r.by[pod.UID].syncPod(ctx, pod, s)
}

func (r *routingSyncer) syncTerminatingPod(ctx context.Context, pod *v1.Pod, s *pleg.PodState, g *int64) error {
	return r.by[pod.UID].syncTerminatingPod(ctx, pod, s, g)
}

func (r *routingSyncer) syncTerminatedPod(ctx context.Context, pod *v1.Pod, s *pleg.PodState, d bool) error {
	return r.by[pod.UID].syncTerminatedPod(ctx, pod, s, d)
}

// A synced pod is due again after the sync frequency (--sync-frequency), whatever it is set to.
func TestWorkerRequeue(t *testing.T) {
	for _, resync := range []time.Duration{DefaultSyncFrequency, 10 * time.Second} {
		f := &fakeSyncer{}
		clk := testclock.NewFakeClock(t0)
		w := newPodWorkers(f, newFakeStates(), clk, resync)
		w.UpdatePod(podUpdate{typ: updateSync, pod: podWithImage("v1")})
		eventually(t, "synced", func() bool { return len(f.log()) == 1 })
		eventually(t, "due time set", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return !w.due["u1"].IsZero()
		})
		if due := w.takeDue(t0.Add(resync - time.Second)); len(due) != 0 {
			t.Fatalf("resync %v: due before the interval: %v", resync, due)
		}
		if due := w.takeDue(t0.Add(resync)); len(due) != 1 {
			t.Fatalf("resync %v: not due after the interval: %v", resync, due)
		}
		w.stopAll()
	}
}
