package podfacts

import v1 "k8s.io/api/core/v1"

// Upstream's oom_score_adj values (pkg/kubelet/qos/policy.go).
const (
	// GuaranteedOOMScoreAdj is given to Guaranteed and node-critical pods.
	GuaranteedOOMScoreAdj = -997
	// BestEffortOOMScoreAdj is given to BestEffort pods.
	BestEffortOOMScoreAdj = 1000
)

// ContainerOOMScoreAdj returns a container's oom_score_adj as upstream's GetContainerOOMScoreAdjust
// computes it: node-critical and Guaranteed pods -997, BestEffort pods 1000, Burstable containers
// 1000 - 1000*request/capacity clamped to [3, 999], where a pod-level memory request not given to containers
// is shared equally among them and a sidecar never scores above the regular container with the smallest
// request. memoryCapacity is the node's memory in bytes; without one a Burstable container scores 999.
func ContainerOOMScoreAdj(pod *v1.Pod, c *v1.Container, memoryCapacity int64) int {
	if IsNodeCritical(pod) {
		return GuaranteedOOMScoreAdj
	}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return BestEffortOOMScoreAdj - 1
	}
	score := func(req int64) int64 {
		return 1000 - (1000*min(req, memoryCapacity))/memoryCapacity // min: the product never overflows
	}
	remaining := remainingPodMemoryPerContainer(pod)
	adj := score(AddSat(requestsOf(c.Resources.Requests).Memory, remaining))
	if isSidecarOf(pod, c) && len(pod.Spec.Containers) > 0 {
		least := requestsOf(pod.Spec.Containers[0].Resources.Requests).Memory
		for i := range pod.Spec.Containers[1:] {
			least = min(least, requestsOf(pod.Spec.Containers[i+1].Resources.Requests).Memory)
		}
		adj = min(adj, score(AddSat(least, remaining)))
	}
	switch {
	case adj < 1000+GuaranteedOOMScoreAdj: // a Guaranteed pod using all memory scores 3
		return 1000 + GuaranteedOOMScoreAdj
	case adj >= BestEffortOOMScoreAdj:
		return BestEffortOOMScoreAdj - 1
	}
	return int(adj)
}

// remainingPodMemoryPerContainer shares the pod-level memory request its containers do not request among
// all of them.
func remainingPodMemoryPerContainer(pod *v1.Pod) int64 {
	if pod.Spec.Resources == nil {
		return 0
	}
	podMem := requestsOf(pod.Spec.Resources.Requests).Memory
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	if podMem == 0 || n == 0 {
		return 0
	}
	return (podMem - ContainerRequests(pod).Memory) / n
}

func isSidecarOf(pod *v1.Pod, c *v1.Container) bool {
	if !IsSidecar(c) {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}
