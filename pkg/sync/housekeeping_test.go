package podsync

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/config"
)

// recordingCgroups is a PodCgroups that keeps a set of pod cgroups, as a host does across kubelet restarts,
// and records every removal.
type recordingCgroups struct {
	mu      sync.Mutex
	pods    map[types.UID]bool
	removed []types.UID
}

func newRecordingCgroups() *recordingCgroups { return &recordingCgroups{pods: map[types.UID]bool{}} }

func (c *recordingCgroups) EnsurePod(_ context.Context, pod *v1.Pod) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods[pod.UID] = true
	return "/kubepods/pod" + string(pod.UID), nil
}

func (c *recordingCgroups) RemovePod(_ context.Context, uid types.UID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods[uid] {
		delete(c.pods, uid)
		c.removed = append(c.removed, uid)
	}
	return nil
}

func (c *recordingCgroups) CleanupOrphans(ctx context.Context, active map[types.UID]bool) error {
	c.mu.Lock()
	var orphans []types.UID
	for uid := range c.pods {
		if !active[uid] {
			orphans = append(orphans, uid)
		}
	}
	c.mu.Unlock()
	for _, uid := range orphans {
		_ = c.RemovePod(ctx, uid)
	}
	return nil
}

func (c *recordingCgroups) removals() []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.removed)
}

// destructiveCalls returns the runtime calls among calls that stop or remove something.
func destructiveCalls(calls []string) []string {
	var out []string
	for _, c := range calls {
		switch c {
		case "StopContainer", "StopPodSandbox", "RemoveContainer", "RemovePodSandbox":
			out = append(out, c)
		}
	}
	return out
}

// A kubelet restarted while its pod sources have not delivered their first list (the API server is down,
// slow or refusing) removes nothing: no container is stopped, no cgroup removed, however long it waits. Once
// the sources sync, a pod deleted meanwhile is stopped and its cgroup removed; the others are adopted.
func TestRestartBeforeSourcesSyncKillsNothing(t *testing.T) {
	h := newHarness(t)
	cg := newRecordingCgroups()
	h.k.cfg.Cgroups, h.k.cgroups = cg, cg
	stop := h.run()
	keep, gone := newPod("u-keep", "keep", "app"), newPod("u-gone", "gone", "app")
	for _, p := range []*v1.Pod{keep, gone} {
		h.createAPIPod(p)
		h.src.send(config.Add, p)
	}
	eventually(t, "both pods running", func() bool {
		a, ok1 := h.apiPod("keep")
		b, ok2 := h.apiPod("gone")
		return ok1 && ok2 && a.Status.Phase == v1.PodRunning && b.Status.Phase == v1.PodRunning
	})
	stop()

	// The new kubelet's sources have not synced: the API server does not answer.
	h.src = &fakeSource{ch: make(chan config.PodUpdate, 100)}
	h.src.unsynced.Store(true)
	h.k = h.newKubelet(h.k.cfg.RootDir, h.k.cfg.PodLogsDir)
	h.k.cfg.Cgroups, h.k.cgroups = cg, cg
	before := len(h.rt.GetCalls())
	stop = h.run()
	defer stop()
	for i := 0; i < 60; i++ { // two minutes of housekeeping
		h.clock.Step(housekeepingPeriod)
		time.Sleep(5 * time.Millisecond)
	}
	h.k.hkBusy.Lock() // the last housekeeping pass has ended
	h.k.hkBusy.Unlock()
	if calls := destructiveCalls(h.rt.GetCalls()[before:]); len(calls) > 0 {
		t.Fatalf("kubelet with unsynced sources called %v", calls)
	}
	if r := cg.removals(); len(r) > 0 {
		t.Fatalf("kubelet with unsynced sources removed the cgroups of %v", r)
	}

	// The API answers: "gone" was deleted meanwhile, "keep" is still bound to the node.
	h.src.send(config.Add, keep)
	h.src.markSynced()
	eventually(t, "the deleted pod stopped and its cgroup removed", func() bool {
		h.clock.Step(housekeepingPeriod)
		return slices.Contains(cg.removals(), gone.UID) && len(h.containers(gone.UID)["app"]) == 0
	})
	if r := cg.removals(); slices.Contains(r, keep.UID) {
		t.Fatalf("the adopted pod's cgroup was removed: %v", r)
	}
	if st := h.containers(keep.UID)["app"]; len(st) != 1 || st[0].State.String() != "CONTAINER_RUNNING" {
		t.Fatalf("the adopted pod's container: %v", st)
	}
}

// A running pod that admission rejects after a restart (the node got a NoExecute taint it does not tolerate
// while the kubelet was down) is Failed with the reason, and what runs of it is stopped, as upstream.
func TestRejectedAtRestartIsStopped(t *testing.T) {
	h := newHarness(t)
	stop := h.run()
	pod := newPod("u1", "web", "app")
	h.createAPIPod(pod)
	h.src.send(config.Add, pod)
	eventually(t, "pod running", func() bool { p, ok := h.apiPod("web"); return ok && p.Status.Phase == v1.PodRunning })
	stop()

	h.k = h.newKubelet(h.k.cfg.RootDir, h.k.cfg.PodLogsDir)
	tainted := &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "evict", Effect: v1.TaintEffectNoExecute}}}}
	tainted.Name = "node1"
	h.k.cfg.Node = func() *v1.Node { return tainted }
	stop = h.run()
	defer stop()
	p, _ := h.apiPod("web")
	h.src.send(config.Add, p)
	eventually(t, "the pod Failed by admission", func() bool {
		p, ok := h.apiPod("web")
		return ok && p.Status.Phase == v1.PodFailed && p.Status.Reason == "TaintToleration"
	})
	eventually(t, "its container stopped", func() bool {
		h.clock.Step(housekeepingPeriod)
		for _, c := range h.containers(pod.UID)["app"] {
			if c.State.String() == "CONTAINER_RUNNING" {
				return false
			}
		}
		return true
	})
}

// pausingCgroups is a recordingCgroups whose CleanupOrphans, before it looks at the cgroups, says so on
// entered and waits for release: a housekeeping pass caught in the middle.
type pausingCgroups struct {
	*recordingCgroups
	entered, release chan struct{}
}

func (c *pausingCgroups) CleanupOrphans(ctx context.Context, active map[types.UID]bool) error {
	select {
	case c.entered <- struct{}{}:
		<-c.release
	default: // only the first pass pauses
	}
	return c.recordingCgroups.CleanupOrphans(ctx, active)
}

func (c *pausingCgroups) has(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[uid]
}

// A pod that arrives while housekeeping decides what is orphaned keeps its cgroup: housekeeping runs beside
// the sync loop, and its look at the known pods must not miss a pod whose worker makes the cgroup meanwhile
// (at 250 pods arriving 10 a second, new pods' directories were removed as orphans as they started).
func TestPodArrivingDuringHousekeepingIsNoOrphan(t *testing.T) {
	h := newHarness(t)
	cg := &pausingCgroups{recordingCgroups: newRecordingCgroups(), entered: make(chan struct{}), release: make(chan struct{})}
	h.k.cfg.Cgroups, h.k.cgroups = cg, cg
	stop := h.run()
	defer stop()
	first := newPod("u-first", "first", "app")
	h.createAPIPod(first)
	h.src.send(config.Add, first)
	eventually(t, "the first pod running", func() bool { p, ok := h.apiPod("first"); return ok && p.Status.Phase == v1.PodRunning })

	go h.clock.Step(housekeepingPeriod)
	select {
	case <-cg.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("housekeeping did not run")
	}
	late := newPod("u-late", "late", "app")
	h.createAPIPod(late)
	h.src.send(config.Add, late)
	// Without the pass keeping new pods out, the late pod's worker makes its cgroup now.
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline) && !cg.has(late.UID); {
		time.Sleep(10 * time.Millisecond)
	}
	close(cg.release)
	eventually(t, "the late pod running", func() bool { p, ok := h.apiPod("late"); return ok && p.Status.Phase == v1.PodRunning })
	h.k.hkBusy.Lock() // the pass has ended
	h.k.hkBusy.Unlock()
	if r := cg.removals(); len(r) > 0 {
		t.Fatalf("housekeeping removed the cgroups of %v as orphans", r)
	}
	if !cg.has(late.UID) {
		t.Fatal("the late pod has no cgroup")
	}
}
