package podfacts

import v1 "k8s.io/api/core/v1"

// Requests are CPU (in thousandths) and memory (in bytes).
type Requests struct {
	MilliCPU int64
	Memory   int64
}

func (r Requests) add(o Requests) Requests {
	return Requests{MilliCPU: AddSat(r.MilliCPU, o.MilliCPU), Memory: AddSat(r.Memory, o.Memory)}
}

func (r Requests) max(o Requests) Requests {
	return Requests{MilliCPU: max(r.MilliCPU, o.MilliCPU), Memory: max(r.Memory, o.Memory)}
}

func requestsOf(list v1.ResourceList) Requests {
	var r Requests
	if q, ok := list[v1.ResourceCPU]; ok {
		r.MilliCPU = max(MilliValue(q), 0)
	}
	if q, ok := list[v1.ResourceMemory]; ok {
		r.Memory = max(Value(q), 0)
	}
	return r
}

// ContainerRequests is what a pod's containers request together, as upstream's AggregateContainerRequests
// computes it: app containers and sidecars (restartable init containers) run together; each other init
// container runs alone beside the sidecars started before it; the pod needs the largest of these.
func ContainerRequests(pod *v1.Pod) Requests {
	return sumContainers(pod, func(c *v1.Container) Requests { return requestsOf(c.Resources.Requests) }, Requests.add, Requests.max, nil)
}

// PodRequests is what a pod requests of its node, as upstream's PodRequests computes it: the pod-level
// requests where the pod sets them, the containers' otherwise, plus the pod's overhead. Admission and the
// API server's placement use it.
func PodRequests(pod *v1.Pod) Requests {
	r := ContainerRequests(pod)
	if pr := pod.Spec.Resources; pr != nil {
		pod := requestsOf(pr.Requests)
		if _, ok := pr.Requests[v1.ResourceCPU]; ok {
			r.MilliCPU = pod.MilliCPU
		}
		if _, ok := pr.Requests[v1.ResourceMemory]; ok {
			r.Memory = pod.Memory
		}
	}
	return r.add(requestsOf(pod.Spec.Overhead))
}

// IsSidecar reports whether an init container is a sidecar: restartPolicy Always.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}
