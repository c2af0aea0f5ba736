package status

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NormalizeTimes returns st with every timestamp cut to the second, the precision the API stores (RFC 3339),
// as upstream's status manager normalizes before comparing. Without it, a status the kubelet computed never
// equals the one the API sends back, and every write is followed by another, empty one.
func NormalizeTimes(st v1.PodStatus) v1.PodStatus {
	out := *st.DeepCopy()
	trunc := func(t *metav1.Time) {
		if t != nil && !t.IsZero() {
			*t = t.Rfc3339Copy()
		}
	}
	trunc(out.StartTime)
	for i := range out.Conditions {
		trunc(&out.Conditions[i].LastProbeTime)
		trunc(&out.Conditions[i].LastTransitionTime)
	}
	states := func(s *v1.ContainerState) {
		if s.Running != nil {
			trunc(&s.Running.StartedAt)
		}
		if s.Terminated != nil {
			trunc(&s.Terminated.StartedAt)
			trunc(&s.Terminated.FinishedAt)
		}
	}
	for _, list := range [][]v1.ContainerStatus{out.InitContainerStatuses, out.ContainerStatuses, out.EphemeralContainerStatuses} {
		for i := range list {
			states(&list[i].State)
			states(&list[i].LastTerminationState)
		}
	}
	return out
}
