package status

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Resize is what the kubelet knows of a pod's in-place resize (see pkg/allocation).
type Resize struct {
	// Allocated is what each container is entitled to, Actuated what each running container was last
	// given, by container name.
	Allocated map[string]v1.ResourceRequirements
	Actuated  map[string]v1.ResourceRequirements
	// PendingReason (Deferred or Infeasible) and PendingMessage: a resize the kubelet has not accepted.
	PendingReason, PendingMessage string
	// PendingGeneration is the pod generation that asked for the pending resize.
	PendingGeneration int64
	// InProgress: an accepted resize not yet applied to every running container; InProgressReason is
	// "Error", with its message, when applying it failed.
	InProgress                          bool
	InProgressReason, InProgressMessage string
	// InProgressGeneration is the generation whose resize is being applied.
	InProgressGeneration int64
}

// applyResize fills the containers' allocatedResources and resources, as upstream does for containers the
// runtime knows (the running ones report what they were given, the others their allocation), and adds the
// resize conditions.
func applyResize(r *Resize, s *v1.PodStatus, prev *v1.PodStatus, now metav1.Time) {
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range list {
			st := &list[i]
			alloc, ok := r.Allocated[st.Name]
			if !ok || st.ContainerID == "" {
				continue
			}
			st.AllocatedResources = alloc.Requests.DeepCopy()
			res := alloc.DeepCopy()
			if act, ok := r.Actuated[st.Name]; ok && st.State.Running != nil {
				res = act.DeepCopy()
			}
			st.Resources = res
		}
	}
	add := func(t v1.PodConditionType, reason, message string, gen int64) {
		c := v1.PodCondition{Type: t, Status: v1.ConditionTrue, Reason: reason, Message: message,
			ObservedGeneration: gen, LastTransitionTime: now}
		for _, o := range prev.Conditions {
			if o.Type == t && o.Reason == reason {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		s.Conditions = append(s.Conditions, c)
	}
	if r.PendingReason != "" {
		add(v1.PodResizePending, r.PendingReason, r.PendingMessage, r.PendingGeneration)
	}
	if r.InProgress {
		add(v1.PodResizeInProgress, r.InProgressReason, r.InProgressMessage, r.InProgressGeneration)
	}
}
