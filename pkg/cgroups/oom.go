package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Upstream's oom_score_adj values (pkg/kubelet/qos/policy.go).
const (
	// KubeletOOMScoreAdj is the kubelet's own oom_score_adj.
	KubeletOOMScoreAdj = -999
	// GuaranteedOOMScoreAdj is given to Guaranteed and node-critical pods.
	GuaranteedOOMScoreAdj = -997
	// BestEffortOOMScoreAdj is given to BestEffort pods.
	BestEffortOOMScoreAdj = 1000
	// MinOOMScoreAdj is the kernel's lowest oom_score_adj.
	MinOOMScoreAdj = -1000
	// capSysResource is CAP_SYS_RESOURCE, needed to lower oom_score_adj
	// below the value a process started with.
	capSysResource = 24
)

// ContainerOOMScoreAdj returns the oom_score_adj of a container as upstream
// computes it: node-critical and Guaranteed pods -997, BestEffort pods
// 1000, Burstable containers 1000 - 1000*request/capacity clamped to
// [3, 999] (pod-level memory requests not given to containers are shared
// equally among them; a sidecar never scores above the regular container
// with the smallest request). memoryCapacity is the node's memory in bytes.
func ContainerOOMScoreAdj(pod *v1.Pod, container *v1.Container, memoryCapacity int64) int {
	if isNodeCriticalPod(pod) {
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
	remaining := remainingPodMemoryPerContainer(pod)
	adj := 1000 - 1000*(container.Resources.Requests.Memory().Value()+remaining)/memoryCapacity
	if isSidecar(pod, container) && len(pod.Spec.Containers) > 0 {
		minReq := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
		for _, c := range pod.Spec.Containers[1:] {
			minReq = min(minReq, c.Resources.Requests.Memory().Value())
		}
		adj = min(adj, 1000-1000*(minReq+remaining)/memoryCapacity)
	}
	return clampBurstableOOMScoreAdj(adj)
}

// clampBurstableOOMScoreAdj keeps Burstable containers above Guaranteed
// ones (a Guaranteed pod using all memory scores 3) and below BestEffort.
func clampBurstableOOMScoreAdj(adj int64) int {
	if adj < 1000+GuaranteedOOMScoreAdj {
		return 1000 + GuaranteedOOMScoreAdj
	}
	if adj >= BestEffortOOMScoreAdj {
		return BestEffortOOMScoreAdj - 1
	}
	return int(adj)
}

// remainingPodMemoryPerContainer shares the pod-level memory request not
// given to containers equally among all containers.
func remainingPodMemoryPerContainer(pod *v1.Pod) int64 {
	if pod.Spec.Resources == nil || pod.Spec.Resources.Requests.Memory().IsZero() {
		return 0
	}
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	if n == 0 {
		return 0
	}
	containers := aggregate(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests }, nil)
	return (pod.Spec.Resources.Requests.Memory().Value() - containers.Memory().Value()) / n
}

func isSidecar(pod *v1.Pod, container *v1.Container) bool {
	if container.RestartPolicy == nil || *container.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == container.Name {
			return true
		}
	}
	return false
}

// ClampOOMScoreAdj raises adj to floor, the lowest value the host lets the
// runtime set (see OOMScoreAdjFloor), and keeps it within [-1000, 1000].
func ClampOOMScoreAdj(adj, floor int) int {
	return min(max(adj, floor, MinOOMScoreAdj), BestEffortOOMScoreAdj)
}

// OOMScoreAdjFloor returns the lowest oom_score_adj the process pid can
// safely give its children: -1000 with CAP_SYS_RESOURCE in its effective
// set; otherwise its own oom_score_adj, since without that capability the
// kernel refuses values below the lowest one a privileged ancestor set (and
// runc then fails to start the container), while values at or above the
// current one are always accepted. procRoot is normally "/proc".
func OOMScoreAdjFloor(procRoot string, pid int) (int, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	capEff, err := parseCapEff(string(status))
	if err != nil {
		return 0, err
	}
	if capEff&(1<<capSysResource) != 0 {
		return MinOOMScoreAdj, nil
	}
	raw, err := os.ReadFile(filepath.Join(dir, "oom_score_adj"))
	if err != nil {
		return 0, fmt.Errorf("read oom_score_adj: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("parse oom_score_adj %q: %w", raw, err)
	}
	return v, nil
}

func parseCapEff(status string) (uint64, error) {
	for line := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			c, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("parse CapEff %q: %w", v, err)
			}
			return c, nil
		}
	}
	return 0, fmt.Errorf("no CapEff line in process status")
}

// ContainerOOMGroup reports whether a container's cgroup gets
// memory.oom.group=1, so that an OOM kill takes the whole container rather
// than one process: on cgroup v2 unless --single-process-oom-kill is set,
// as upstream. The runtime puts it in the container's OCI spec
// (linux.resources.unified); pod cgroups do not carry it.
func ContainerOOMGroup(mode Mode, singleProcessOOMKill bool) bool {
	return mode.unified() && !singleProcessOOMKill
}
