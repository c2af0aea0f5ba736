package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// QOSClass returns the pod's quality of service class, as upstream's qos.GetPodQOS computes it (cpu and
// memory of init and app containers; requests default to limits only when the API server defaulted them).
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests := map[v1.ResourceName]int64{}
	limits := map[v1.ResourceName]int64{}
	guaranteed := true
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for name, q := range c.Resources.Requests {
			if !qosResource(name) || q.Sign() <= 0 {
				continue
			}
			requests[name] = podfacts.AddSat(requests[name], podfacts.MilliValue(q))
		}
		found := map[v1.ResourceName]bool{}
		for name, q := range c.Resources.Limits {
			if !qosResource(name) || q.Sign() <= 0 {
				continue
			}
			found[name] = true
			limits[name] = podfacts.AddSat(limits[name], podfacts.MilliValue(q))
		}
		if !found[v1.ResourceCPU] || !found[v1.ResourceMemory] {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim != req {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

func qosResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory
}
