package podspec

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// ContainerResources builds the CRI resources of a container: CPU shares from its request (or limit), a CFS
// quota from its limit, its memory limit, and its OOM score adjustment relative to memCapacity, the
// machine's memory in bytes (as upstream, not what pods may allocate; 0 when unknown).
func ContainerResources(pod *v1.Pod, c *v1.Container, memCapacity int64) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq, hasReq := c.Resources.Requests[v1.ResourceCPU]
	cpuLim, hasLim := c.Resources.Limits[v1.ResourceCPU]
	switch {
	case hasReq:
		r.CpuShares = int64(podfacts.MilliCPUToShares(podfacts.MilliValue(cpuReq)))
	case hasLim:
		r.CpuShares = int64(podfacts.MilliCPUToShares(podfacts.MilliValue(cpuLim)))
	default:
		r.CpuShares = podfacts.MinShares
	}
	if hasLim {
		r.CpuPeriod = podfacts.QuotaPeriod
		r.CpuQuota = podfacts.MilliCPUToQuota(podfacts.MilliValue(cpuLim), podfacts.QuotaPeriod)
	}
	if q, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = max(podfacts.Value(q), 0)
	}
	r.OomScoreAdj = int64(podfacts.ContainerOOMScoreAdj(pod, c, memCapacity))
	return r
}
