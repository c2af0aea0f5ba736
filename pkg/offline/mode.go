package offline

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Mode says which checkpointed pods run while the API server is away.
type Mode string

// The modes of --offline-autonomy.
const (
	None       Mode = "none"
	Tolerating Mode = "tolerating"
	All        Mode = "all"
)

// ParseMode reads a --offline-autonomy value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case None, Tolerating, All:
		return m, nil
	}
	return "", fmt.Errorf("offline autonomy %q: want none, tolerating or all", s)
}

// UnreachableTaint is the taint the control plane puts on a node it cannot hear from.
const UnreachableTaint = "node.kubernetes.io/unreachable"

// RunsOffline says whether pod, as last seen from the API server, runs from the checkpoint under mode: never
// a pod being deleted or finished (it would run twice), and under Tolerating only a pod that tolerates the
// unreachable NoExecute taint without tolerationSeconds (the control plane never evicts it from an
// unreachable node). Mirror pods are their static pods' business.
func RunsOffline(pod *v1.Pod, mode Mode) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	switch mode {
	case All:
		return true
	case Tolerating:
		return toleratesUnreachableForever(pod.Spec.Tolerations)
	}
	return false
}

// toleratesUnreachableForever says whether tolerations hold one that matches the unreachable NoExecute taint
// with no time limit.
func toleratesUnreachableForever(tolerations []v1.Toleration) bool {
	taint := &v1.Taint{Key: UnreachableTaint, Effect: v1.TaintEffectNoExecute}
	for i := range tolerations {
		t := &tolerations[i]
		if t.TolerationSeconds == nil && t.ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}
