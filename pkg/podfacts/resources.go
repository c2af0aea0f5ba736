package podfacts

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// sumContainers applies upstream's formula for a pod's containers (AggregateContainerRequests and
// AggregateContainerLimits, KEP-753) to one amount of each container: app containers and sidecars
// (restartable init containers) run together and add up; each other init container runs alone beside the
// sidecars started before it; the pod needs the larger of the two. add and larger must not change their
// arguments. seen, when set, gets every container's effective amount: an app container's own, a sidecar's
// with the sidecars before it, an init container's with the sidecars before it.
func sumContainers[T any](pod *v1.Pod, of func(*v1.Container) T, add, larger func(a, b T) T, seen func(T)) T {
	var app T
	for i := range pod.Spec.Containers {
		a := of(&pod.Spec.Containers[i])
		app = add(app, a)
		if seen != nil {
			seen(a)
		}
	}
	var sidecars, inits T
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var effective T
		if IsSidecar(c) {
			sidecars = add(sidecars, of(c))
			effective = sidecars
		} else {
			effective = add(of(c), sidecars)
		}
		if seen != nil {
			seen(effective)
		}
		inits = larger(inits, effective)
	}
	return larger(add(app, sidecars), inits)
}

// PodRequestList is what a pod requests of every resource, as upstream's PodRequests (component-helpers)
// sums it: the containers' requests by sumContainers; the pod-level requests of CPU, memory and huge pages
// where the pod sets them; plus the pod's overhead. Eviction and the cgroups use it; PodRequests is its
// CPU and memory.
func PodRequestList(pod *v1.Pod) v1.ResourceList {
	reqs := AggregateContainerRequests(pod)
	if pod.Spec.Resources != nil {
		reqs = podLevel(reqs, pod.Spec.Resources.Requests)
	}
	return addLists(reqs, pod.Spec.Overhead)
}

// PodLimitList is a pod's limit of every resource, as upstream's PodLimits sums it: the containers' limits
// by sumContainers; the pod-level limits of CPU, memory and huge pages where the pod sets them; the
// overhead added to each non-zero limit. cpuDeclared and memoryDeclared report whether the pod limits that
// resource everywhere, as upstream's ResourceConfigForPod decides whether a pod's cgroup gets a CFS quota
// and a memory limit: every container's effective limit is non-zero, or the pod-level limit is.
func PodLimitList(pod *v1.Pod) (lims v1.ResourceList, cpuDeclared, memoryDeclared bool) {
	cpuDeclared, memoryDeclared = true, true
	lims = sumContainers(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits }, addLists, maxLists,
		func(effective v1.ResourceList) {
			if effective.Cpu().IsZero() {
				cpuDeclared = false
			}
			if effective.Memory().IsZero() {
				memoryDeclared = false
			}
		})
	if r := pod.Spec.Resources; r != nil && len(r.Limits) > 0 {
		lims = podLevel(lims, r.Limits)
		if !r.Limits.Cpu().IsZero() {
			cpuDeclared = true
		}
		if !r.Limits.Memory().IsZero() {
			memoryDeclared = true
		}
	}
	for name, q := range pod.Spec.Overhead {
		if v, ok := lims[name]; ok && !v.IsZero() {
			v.Add(q)
			lims[name] = v
		}
	}
	return lims, cpuDeclared, memoryDeclared
}

// PodMemoryLimit is the memory limit in bytes of the pod's cgroup, as upstream's ResourceConfigForPod sets
// it: the summed limit when the pod limits memory everywhere (see PodLimitList), 0 (no limit) otherwise.
// The cgroups and the sizing of a memory-backed emptyDir use it.
func PodMemoryLimit(pod *v1.Pod) int64 {
	lims, _, memoryDeclared := PodLimitList(pod)
	if !memoryDeclared {
		return 0
	}
	return Value(*lims.Memory())
}

// AggregateContainerRequests and AggregateContainerLimits are what the pod's containers ask for together
// (sumContainers: init containers, sidecars and containers as upstream's resource helpers sum them), without
// the pod-level resources or the overhead: what the API server checks pod-level resources against.
func AggregateContainerRequests(pod *v1.Pod) v1.ResourceList {
	return sumContainers(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests }, addLists, maxLists, nil)
}

// AggregateContainerLimits: see AggregateContainerRequests.
func AggregateContainerLimits(pod *v1.Pod) v1.ResourceList {
	return sumContainers(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits }, addLists, maxLists, nil)
}

// SupportedPodLevelResource says whether a resource may be set at the pod level (spec.resources): CPU,
// memory and huge pages, as upstream's IsSupportedPodLevelResource.
func SupportedPodLevelResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// podLevel is list with the pod-level amounts of CPU, memory and huge pages in place of the summed ones
// (upstream's IsSupportedPodLevelResource).
func podLevel(list, pod v1.ResourceList) v1.ResourceList {
	for name, q := range pod {
		if SupportedPodLevelResource(name) {
			if list == nil {
				list = v1.ResourceList{}
			}
			list[name] = q.DeepCopy()
		}
	}
	return list
}

// addLists is a new list holding the sum of a and b.
func addLists(a, b v1.ResourceList) v1.ResourceList {
	return mergeLists(a, b, func(x, y resource.Quantity) resource.Quantity { x.Add(y); return x })
}

// maxLists is a new list holding the larger of a's and b's amount of each resource.
func maxLists(a, b v1.ResourceList) v1.ResourceList {
	return mergeLists(a, b, func(x, y resource.Quantity) resource.Quantity {
		if y.Cmp(x) > 0 {
			return y.DeepCopy()
		}
		return x
	})
}

// mergeLists is a new list holding a's and b's amounts, both(a's copy, b's) where both have the resource.
func mergeLists(a, b v1.ResourceList, both func(x, y resource.Quantity) resource.Quantity) v1.ResourceList {
	out := make(v1.ResourceList, max(len(a), len(b)))
	for name, q := range a {
		out[name] = q.DeepCopy()
	}
	for name, q := range b {
		if v, ok := out[name]; ok {
			out[name] = both(v, q)
		} else {
			out[name] = q.DeepCopy()
		}
	}
	return out
}
