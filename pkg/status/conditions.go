package status

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Condition reasons, as upstream names them.
const (
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
)

// KubeletOwned reports whether the kubelet owns a condition type (it writes it; others are kept from the API).
func KubeletOwned(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady,
		v1.PodResizePending, v1.PodResizeInProgress:
		return true
	}
	return false
}

func conditions(pod *v1.Pod, prev, s *v1.PodStatus, sandboxes []*runtimeapi.PodSandboxStatus, now metav1.Time) []v1.PodCondition {
	all := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	initialized := hasInitialized(pod, s.ContainerStatuses)
	containersReady := containersReadyCondition(pod, all, s.Phase)
	ready := containersReady
	ready.Type = v1.PodReady
	if ready.Status == v1.ConditionTrue {
		ready = readinessGates(pod)
	}
	want := []v1.PodCondition{
		// A pod the kubelet runs is scheduled: upstream's kubelet writes PodScheduled too, with the pod's
		// generation, keeping the scheduler's transition time.
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		sandboxCondition(pod, sandboxes),
		initializedCondition(pod, all, s.Phase, initialized),
		ready,
		containersReady,
	}
	var out []v1.PodCondition
	// Conditions the kubelet does not own (DisruptionTarget, readiness gates) are the API's, as upstream
	// keeps them: others set them on pods/status.
	for _, c := range pod.Status.Conditions {
		if !KubeletOwned(c.Type) {
			out = append(out, c)
		}
	}
	for _, c := range want {
		c.ObservedGeneration = pod.Generation
		c.LastTransitionTime = now
		if t, ok := keptTransition(prev.Conditions, c); ok {
			c.LastTransitionTime = t
		}
		if t, ok := keptTransition(pod.Status.Conditions, c); ok && c.Type == v1.PodScheduled {
			c.LastTransitionTime = t // the scheduler's
		}
		out = append(out, c)
	}
	return out
}

// keptTransition is the transition time list has for c's type when it has c's status: the condition did not
// change since then.
func keptTransition(list []v1.PodCondition, c v1.PodCondition) (metav1.Time, bool) {
	for _, o := range list {
		if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
			return o.LastTransitionTime, true
		}
	}
	return metav1.Time{}, false
}

func sandboxCondition(pod *v1.Pod, sandboxes []*runtimeapi.PodSandboxStatus) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}
	if len(sandboxes) == 0 {
		return c
	}
	sb := sandboxes[0]
	if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY && (pod.Spec.HostNetwork || sb.GetNetwork().GetIp() != "") {
		c.Status = v1.ConditionTrue
	}
	return c
}

func initializedCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase, initialized bool) v1.PodCondition {
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st, ok := findStatus(statuses, c.Name)
		if !ok {
			unknown = append(unknown, c.Name)
			continue
		}
		if podfacts.IsSidecar(c) {
			if st.Started == nil || !*st.Started {
				incomplete = append(incomplete, c.Name)
			}
			continue
		}
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue, Reason: ReasonPodCompleted}
	}
	if initialized || (len(unknown) == 0 && len(incomplete) == 0) {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	}
	return v1.PodCondition{
		Type: v1.PodInitialized, Status: v1.ConditionFalse,
		Reason: ReasonContainersNotInitialized, Message: listMessage(unknown, incomplete, "incomplete"),
	}
}

func containersReadyCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	var unknown, unready []string
	check := func(c *v1.Container) {
		st, ok := findStatus(statuses, c.Name)
		if !ok {
			unknown = append(unknown, c.Name)
			return
		}
		if !st.Ready {
			unready = append(unready, c.Name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if podfacts.IsSidecar(&pod.Spec.InitContainers[i]) {
			check(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: ReasonPodCompleted}
	}
	if phase == v1.PodFailed { // as upstream: its containers may still be stopping (eviction, deadline)
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: ReasonPodFailed}
	}
	if len(unknown) == 0 && len(unready) == 0 {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
	}
	return v1.PodCondition{
		Type: v1.ContainersReady, Status: v1.ConditionFalse,
		Reason: ReasonContainersNotReady, Message: listMessage(unknown, unready, "unready"),
	}
}

// readinessGates returns the Ready condition for a pod whose containers are ready: false while a gate's
// condition, as the API has it, is missing or not true, with upstream's message per gate.
func readinessGates(pod *v1.Pod) v1.PodCondition {
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == g.ConditionType {
				found = &pod.Status.Conditions[i]
				break
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), found.Status))
		}
	}
	if len(msgs) == 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	}
	return v1.PodCondition{
		Type: v1.PodReady, Status: v1.ConditionFalse,
		Reason: ReasonReadinessGatesNotReady, Message: strings.Join(msgs, ", "),
	}
}

func listMessage(unknown, bad []string, badWord string) string {
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(bad) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %s", badWord, bad))
	}
	return strings.Join(msgs, ", ")
}

// isReady reports whether st has the Ready condition True.
func isReady(st v1.PodStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// NeedsReadinessReconcile reports whether the Ready condition the API has for a pod with readiness gates no
// longer agrees with its gates' conditions (someone set one), so that the pod must be synced again, as
// upstream's NeedToReconcilePodReadiness.
func NeedsReadinessReconcile(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	var ready, containersReady *v1.PodCondition
	for i, c := range pod.Status.Conditions {
		switch c.Type {
		case v1.PodReady:
			ready = &pod.Status.Conditions[i]
		case v1.ContainersReady:
			containersReady = &pod.Status.Conditions[i]
		}
	}
	if ready == nil || containersReady == nil || containersReady.Status != v1.ConditionTrue {
		return false
	}
	return (ready.Status == v1.ConditionTrue) != (readinessGates(pod).Status == v1.ConditionTrue)
}
