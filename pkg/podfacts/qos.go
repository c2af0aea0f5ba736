package podfacts

import v1 "k8s.io/api/core/v1"

// QOSClass returns the pod's QoS class as upstream's GetPodQOS does: status.qosClass when the pod has one
// (a pod's class never changes once set), else ComputeQOSClass.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputeQOSClass(pod)
}

// ComputeQOSClass computes the class as upstream's ComputePodQOS does. Pod-level resources decide when the
// pod sets them. Otherwise the positive CPU and memory requests and limits of every container (init
// containers included) are summed: BestEffort when there are none, Guaranteed when every container sets
// both a CPU and a memory limit and the summed requests equal the summed limits, Burstable otherwise.
// Quantities are summed in thousandths, saturating, so absurd ones cost nothing.
func ComputeQOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := map[v1.ResourceName]int64{}, map[v1.ResourceName]int64{}
	guaranteed := true
	add := func(into map[v1.ResourceName]int64, list v1.ResourceList) (cpu, mem bool) {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := list[name]; ok && q.Sign() > 0 {
				into[name] = AddSat(into[name], MilliValue(q))
				cpu, mem = cpu || name == v1.ResourceCPU, mem || name == v1.ResourceMemory
			}
		}
		return cpu, mem
	}
	if r := pod.Spec.Resources; r != nil {
		add(requests, r.Requests)
		if len(r.Limits) > 0 {
			if cpu, mem := add(limits, r.Limits); !cpu || !mem {
				guaranteed = false
			}
		}
	} else {
		for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				add(requests, list[i].Resources.Requests)
				if cpu, mem := add(limits, list[i].Resources.Limits); !cpu || !mem {
					guaranteed = false
				}
			}
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
