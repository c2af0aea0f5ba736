package podsync

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/podspec"
)

// containerResources builds the CRI resources of a container (podspec.ContainerResources), its OOM score
// relative to the node's memory capacity, its swap limit by memorySwap.swapBehavior (podspec.ConfigureSwap).
func (k *Kubelet) containerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
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
	r := podspec.ContainerResources(pod, c, memCapacity)
	podspec.ConfigureSwap(r, k.cfg.Swap, pod, c)
	return r
}
