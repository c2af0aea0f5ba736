package podsync

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// containerResources builds the CRI resources of a container.
func (k *Kubelet) containerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
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
	// As upstream, the score is relative to the machine's memory, not to what pods may allocate.
	var memCapacity int64
	capacity := k.cfg.NodeAllocatable
	if k.cfg.NodeCapacity != nil {
		capacity = k.cfg.NodeCapacity
	}
	if capacity != nil {
		if q, ok := capacity()[v1.ResourceMemory]; ok {
			memCapacity = podfacts.Value(q)
		}
	}
	r.OomScoreAdj = int64(podfacts.ContainerOOMScoreAdj(pod, c, memCapacity))
	return r
}
