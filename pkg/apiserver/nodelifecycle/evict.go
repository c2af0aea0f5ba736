package nodelifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Forever is the eviction time of a pod that tolerates its node's NoExecute taints without a limit.
var Forever = time.Time{}

// EvictionTime returns when a pod on a node with taints is to be evicted: now when it does not tolerate
// one of the NoExecute taints, the earliest timeAdded + tolerationSeconds over the tolerations matching
// them, or Forever (the zero time) when they are tolerated without a limit or there are none. addedAt is
// when a taint was added (its timeAdded, or when the server first saw it).
func EvictionTime(pod *corev1.Pod, taints []corev1.Taint, addedAt func(corev1.Taint) time.Time, now time.Time) time.Time {
	due := Forever
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated, limited := false, false
		var limit time.Duration
		for j := range pod.Spec.Tolerations {
			tol := &pod.Spec.Tolerations[j]
			if !tol.ToleratesTaint(klog.Background(), t, false) {
				continue
			}
			tolerated = true
			if tol.TolerationSeconds == nil {
				continue
			}
			d := max(time.Duration(*tol.TolerationSeconds)*time.Second, 0)
			if !limited || d < limit {
				limit, limited = d, true
			}
		}
		if !tolerated {
			return now
		}
		if !limited {
			continue
		}
		at := addedAt(*t).Add(limit)
		if due.IsZero() || at.Before(due) {
			due = at
		}
	}
	return due
}
