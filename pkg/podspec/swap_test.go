package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

func swapPod(req, lim string, priority int32) (*v1.Pod, *v1.Container) {
	c := v1.Container{Name: "app"}
	if req != "" {
		c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(req)}
	}
	if lim != "" {
		c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(lim)}
	}
	if req == "" && lim == "" {
		c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")} // Burstable without memory
	}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c}, Priority: &priority}}
	return pod, &pod.Spec.Containers[0]
}

// Each container's swap limit as upstream's kubelet 1.35 sets it: a 1 GiB request on a machine of 4 GiB
// with 2 GiB of swap gets 512 MiB under LimitedSwap.
func TestConfigureSwap(t *testing.T) {
	limited := Swap{Behavior: LimitedSwap, CgroupV2: true, ControllerAvailable: true, MemoryCapacity: 4 << 30, SwapCapacity: 2 << 30}
	noSwap := limited
	noSwap.Behavior = ""
	v1Host := limited
	v1Host.CgroupV2 = false
	noController := limited
	noController.ControllerAvailable = false
	unknownMemory := limited
	unknownMemory.MemoryCapacity = 0
	for _, tt := range []struct {
		name          string
		swap          Swap
		req, lim      string
		priority      int32
		wantUnified   string // memory.swap.max; "-" for none
		wantSwapLimit int64  // MemorySwapLimitInBytes
	}{
		{name: "LimitedSwap, Burstable with a request", swap: limited, req: "1Gi", lim: "2Gi", wantUnified: "536870912"},
		{name: "LimitedSwap, Burstable without a limit", swap: limited, req: "512Mi", wantUnified: "268435456"},
		{name: "LimitedSwap, request equal to limit", swap: limited, req: "1Gi", lim: "1Gi", wantUnified: "0"},
		{name: "LimitedSwap, no memory asked", swap: limited, wantUnified: "0"},
		{name: "LimitedSwap, critical pod", swap: limited, req: "1Gi", lim: "2Gi", priority: podfacts.SystemCriticalPriority, wantUnified: "0"},
		{name: "LimitedSwap, a request above the machine", swap: limited, req: "8Gi", lim: "9Gi", wantUnified: "0"},
		{name: "LimitedSwap, machine memory unknown", swap: unknownMemory, req: "1Gi", lim: "2Gi", wantUnified: "0"},
		{name: "NoSwap on v2", swap: noSwap, req: "1Gi", lim: "2Gi", wantUnified: "0"},
		{name: "cgroup v1: memory+swap at the limit", swap: v1Host, req: "1Gi", lim: "2Gi", wantUnified: "-", wantSwapLimit: 2 << 30},
		{name: "no swap accounting: left to the runtime", swap: noController, req: "1Gi", lim: "2Gi", wantUnified: "-"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod, c := swapPod(tt.req, tt.lim, tt.priority)
			r := ContainerResources(pod, c, 4<<30)
			ConfigureSwap(r, tt.swap, pod, c)
			got, ok := r.Unified["memory.swap.max"]
			if !ok {
				got = "-"
			}
			if got != tt.wantUnified || r.MemorySwapLimitInBytes != tt.wantSwapLimit {
				t.Fatalf("memory.swap.max %q, memory+swap %d; want %q, %d", got, r.MemorySwapLimitInBytes, tt.wantUnified, tt.wantSwapLimit)
			}
		})
	}
}

// Guaranteed and BestEffort pods never swap.
func TestContainerSwapBehaviorByQOS(t *testing.T) {
	s := Swap{Behavior: LimitedSwap, CgroupV2: true, ControllerAvailable: true, MemoryCapacity: 4 << 30, SwapCapacity: 1 << 30}
	both := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}
	guaranteed := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Resources: v1.ResourceRequirements{Requests: both, Limits: both}}}}}
	bestEffort := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{}}}}
	for name, pod := range map[string]*v1.Pod{"Guaranteed": guaranteed, "BestEffort": bestEffort} {
		if got := ContainerSwapBehavior(s, pod, &pod.Spec.Containers[0]); got != NoSwap {
			t.Errorf("%s: %s, want NoSwap", name, got)
		}
	}
	r := &runtimeapi.LinuxContainerResources{}
	ConfigureSwap(r, s, bestEffort, &bestEffort.Spec.Containers[0])
	if r.Unified["memory.swap.max"] != "0" {
		t.Errorf("BestEffort memory.swap.max %q, want 0", r.Unified["memory.swap.max"])
	}
}
