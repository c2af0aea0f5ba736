package podspec

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Swap behaviours of memorySwap.swapBehavior, upstream's names.
const (
	NoSwap      = "NoSwap"
	LimitedSwap = "LimitedSwap"
)

// Swap is what a container's swap limit depends on: the configured behaviour and the host.
type Swap struct {
	// Behavior is memorySwap.swapBehavior: NoSwap (also when empty) or LimitedSwap.
	Behavior string
	// CgroupV2 says the host runs cgroup v2; ControllerAvailable that it accounts swap (memory.swap.max on
	// v2, memory.memsw.limit_in_bytes on v1).
	CgroupV2, ControllerAvailable bool
	// MemoryCapacity and SwapCapacity are the machine's memory and swap in bytes.
	MemoryCapacity, SwapCapacity int64
}

// ContainerSwapBehavior is the behaviour a container gets, as upstream's kubelet 1.35 decides it: LimitedSwap
// only where configured, on cgroup v2 with swap accounted, for a container of a Burstable pod that is not
// critical, asks for memory, and whose memory request differs from its limit; NoSwap otherwise.
func ContainerSwapBehavior(s Swap, pod *v1.Pod, c *v1.Container) string {
	if s.Behavior != LimitedSwap || !s.ControllerAvailable || !s.CgroupV2 || podfacts.IsCritical(pod) {
		return NoSwap
	}
	req, lim := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	if podfacts.QOSClass(pod) != v1.PodQOSBurstable || (req.IsZero() && lim.IsZero()) || req.Cmp(*lim) == 0 {
		return NoSwap
	}
	return LimitedSwap
}

// ConfigureSwap sets a container's swap limit in r as upstream's kubelet does: under LimitedSwap a share of
// the machine's swap in proportion to the container's memory request (request / memory capacity × swap
// capacity) as memory.swap.max; under NoSwap memory.swap.max 0 on cgroup v2, and on cgroup v1 memory+swap
// equal to the memory limit where swap is accounted. A request the share cannot be computed for (a machine
// of unknown memory, a request above it) gets no swap.
func ConfigureSwap(r *runtimeapi.LinuxContainerResources, s Swap, pod *v1.Pod, c *v1.Container) {
	if !s.ControllerAvailable {
		return
	}
	if !s.CgroupV2 {
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return
	}
	limit := int64(0)
	if ContainerSwapBehavior(s, pod, c) == LimitedSwap {
		if l, err := limitedSwap(c.Resources.Requests.Memory().Value(), s.MemoryCapacity, s.SwapCapacity); err == nil {
			limit = l
		}
	}
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified["memory.swap.max"] = strconv.FormatInt(limit, 10)
}

// limitedSwap is upstream's calcSwapForBurstablePods: (request / memory capacity) × swap capacity.
func limitedSwap(request, memoryCapacity, swapCapacity int64) (int64, error) {
	if memoryCapacity <= 0 {
		return 0, fmt.Errorf("total node memory is 0")
	}
	if request > memoryCapacity {
		return 0, fmt.Errorf("container request %d is larger than total node memory %d", request, memoryCapacity)
	}
	return int64(float64(request) / float64(memoryCapacity) * float64(swapCapacity)), nil
}
