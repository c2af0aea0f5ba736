package podsync

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/metrics"
)

// startTracker measures pod starts for kubelet_pod_start_duration_seconds (from the kubelet's first sight of
// a pod to all its containers running) and kubelet_pod_start_sli_duration_seconds (from the pod's creation,
// less the time its images took to pull), once per pod. A pod that already ran when first seen (adopted by a
// restarted kubelet) is not counted.
type startTracker struct {
	mu   sync.Mutex
	pods map[types.UID]*podStart
}

type podStart struct {
	firstSeen time.Time
	pulling   time.Duration
	done      bool
}

func newStartTracker() *startTracker { return &startTracker{pods: map[types.UID]*podStart{}} }

// synced notes a sync of pod whose computed status is st, at now, and observes the start once all its
// containers run.
func (t *startTracker) synced(pod *v1.Pod, st *v1.PodStatus, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps, ok := t.pods[pod.UID]
	if !ok {
		ps = &podStart{firstSeen: now, done: allRunning(&pod.Status)}
		t.pods[pod.UID] = ps
	}
	if ps.done || !allRunning(st) {
		return
	}
	ps.done = true
	metrics.PodStartDuration.Observe(now.Sub(ps.firstSeen).Seconds())
	if sli := now.Sub(pod.CreationTimestamp.Time) - ps.pulling; !pod.CreationTimestamp.IsZero() && sli >= 0 {
		metrics.PodStartSLIDuration.Observe(sli.Seconds())
	}
}

// pulled adds the time an image pull of the pod took.
func (t *startTracker) pulled(uid types.UID, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ps, ok := t.pods[uid]; ok && !ps.done {
		ps.pulling += d
	}
}

// forget drops a pod.
func (t *startTracker) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}

// allRunning reports whether the status has every container running (and at least one).
func allRunning(st *v1.PodStatus) bool {
	if st.Phase != v1.PodRunning || len(st.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}
