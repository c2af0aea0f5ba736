package allocation

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Reasons of the PodResizePending condition, as upstream names them.
const (
	ReasonDeferred   = "Deferred"
	ReasonInfeasible = "Infeasible"
	// ReasonError is the PodResizeInProgress reason when applying an accepted resize failed.
	ReasonError = "Error"
)

// FromSpec is the allocation a pod's spec asks for: the resources of each of its containers (init and
// sidecar containers too), by name.
func FromSpec(pod *v1.Pod) map[string]v1.ResourceRequirements {
	out := map[string]v1.ResourceRequirements{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			out[list[i].Name] = *list[i].Resources.DeepCopy()
		}
	}
	return out
}

// Differs reports whether the pod's spec asks for resources other than alloc's.
func Differs(pod *v1.Pod, alloc map[string]v1.ResourceRequirements) bool {
	return !equality.Semantic.DeepEqual(FromSpec(pod), alloc)
}

// WithAllocated returns the pod as the kubelet runs it: a copy whose containers carry the allocated
// resources, or pod itself when they are those of its spec. A container the allocation does not name keeps
// its spec.
func WithAllocated(pod *v1.Pod, alloc map[string]v1.ResourceRequirements) *v1.Pod {
	if alloc == nil || !Differs(pod, alloc) {
		return pod
	}
	out := pod.DeepCopy()
	for _, list := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range list {
			if r, ok := alloc[list[i].Name]; ok {
				list[i].Resources = *r.DeepCopy()
			}
		}
	}
	return out
}

// Infeasible returns why a pod asking for these resources can never fit the node, whatever else runs
// ("" when it can): its total cpu or memory requests beyond the node's allocatable, in upstream's words,
// memory first. Static pods cannot be resized.
func Infeasible(desired *v1.Pod, allocatable v1.ResourceList) string {
	if podfacts.IsStatic(desired) {
		return "In-place resize of static-pods is not supported"
	}
	req := podfacts.PodRequests(desired)
	if a, ok := allocatable[v1.ResourceMemory]; ok && req.Memory > podfacts.Value(a) {
		return fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", req.Memory, podfacts.Value(a))
	}
	if a, ok := allocatable[v1.ResourceCPU]; ok && req.MilliCPU > podfacts.MilliValue(a) {
		return fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", req.MilliCPU, podfacts.MilliValue(a))
	}
	return ""
}

// UpperBound returns the pod with, for each container, the larger of its actuated and allocated cpu and
// memory (requests and limits): the pod cgroup is raised to it before containers change, and brought down
// to the allocation after, so that it never holds less than its containers (cgroup v1 refuses a parent CPU
// quota below a child's).
func UpperBound(allocated *v1.Pod, actuated map[string]v1.ResourceRequirements) *v1.Pod {
	var out *v1.Pod
	for li, list := range [][]v1.Container{allocated.Spec.InitContainers, allocated.Spec.Containers} {
		for i := range list {
			act, ok := actuated[list[i].Name]
			if !ok {
				continue
			}
			req := maxList(list[i].Resources.Requests, act.Requests)
			lim := maxList(list[i].Resources.Limits, act.Limits)
			if equality.Semantic.DeepEqual(req, list[i].Resources.Requests) && equality.Semantic.DeepEqual(lim, list[i].Resources.Limits) {
				continue
			}
			if out == nil {
				out = allocated.DeepCopy()
			}
			c := &out.Spec.Containers[i]
			if li == 0 {
				c = &out.Spec.InitContainers[i]
			}
			c.Resources.Requests, c.Resources.Limits = req, lim
		}
	}
	if out == nil {
		return allocated
	}
	return out
}

// maxList returns a's cpu and memory raised to b's where b holds more, for the names a has; other names
// are a's.
func maxList(a, b v1.ResourceList) v1.ResourceList {
	out := a.DeepCopy()
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		av, ok := a[name]
		if !ok {
			continue
		}
		if bv, ok := b[name]; ok && bv.Cmp(av) > 0 {
			out[name] = bv.DeepCopy()
		}
	}
	return out
}

// CPUMemoryEqual reports whether two containers' cpu and memory requests and limits are the same: what an
// in-place resize changes.
func CPUMemoryEqual(a, b v1.ResourceRequirements) bool {
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if !quantityEqual(a.Requests, b.Requests, name) || !quantityEqual(a.Limits, b.Limits, name) {
			return false
		}
	}
	return true
}

func quantityEqual(a, b v1.ResourceList, name v1.ResourceName) bool {
	av, aok := a[name]
	bv, bok := b[name]
	return aok == bok && (!aok || av.Cmp(bv) == 0)
}

// RestartNeeded reports whether the change from actuated to allocated touches a resource whose resize
// policy is RestartContainer (NotRequired is the default).
func RestartNeeded(c *v1.Container, actuated v1.ResourceRequirements) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy != v1.RestartContainer {
			continue
		}
		if !quantityEqual(c.Resources.Requests, actuated.Requests, p.ResourceName) ||
			!quantityEqual(c.Resources.Limits, actuated.Limits, p.ResourceName) {
			return true
		}
	}
	return false
}

// EventMessage is the body of upstream's resize events: the containers' allocated resources and the pod's
// generation, as JSON after prefix ("Pod resize started", ...), with the error when there is one.
func EventMessage(prefix string, pod *v1.Pod, err error) string {
	type ctr struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources"`
	}
	body := struct {
		InitContainers []ctr  `json:"initContainers,omitempty"`
		Containers     []ctr  `json:"containers,omitempty"`
		Generation     int64  `json:"generation,omitempty"`
		Error          string `json:"error,omitempty"`
	}{Generation: pod.Generation}
	for _, c := range pod.Spec.InitContainers {
		if podfacts.IsSidecar(&c) {
			body.InitContainers = append(body.InitContainers, ctr{c.Name, c.Resources})
		}
	}
	for _, c := range pod.Spec.Containers {
		body.Containers = append(body.Containers, ctr{c.Name, c.Resources})
	}
	if err != nil {
		body.Error = err.Error()
	}
	data, _ := json.Marshal(body)
	return prefix + ": " + string(data)
}
