package status

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
			requests[name] = addSat(requests[name], MilliValue(q))
		}
		found := map[v1.ResourceName]bool{}
		for name, q := range c.Resources.Limits {
			if !qosResource(name) || q.Sign() <= 0 {
				continue
			}
			found[name] = true
			limits[name] = addSat(limits[name], MilliValue(q))
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

// Quantities beyond this are treated as this (about 9.2e15 units, far above any real node).
const maxMilli = math.MaxInt64 / 2

// MilliValue returns q in thousandths, saturated at about ±9.2e15 units. Unlike Quantity.MilliValue it stays
// fast on absurd exponents ("1e99999999"), which would otherwise take minutes of big-number arithmetic.
func MilliValue(q resource.Quantity) int64 {
	f := q.AsApproximateFloat64()
	switch {
	case math.IsNaN(f):
		return 0
	case f >= maxMilli/1000:
		return maxMilli
	case f <= -maxMilli/1000:
		return -maxMilli
	}
	return q.MilliValue()
}

// Value returns q rounded up to a whole unit, saturated like MilliValue.
func Value(q resource.Quantity) int64 {
	m := MilliValue(q)
	if m >= maxMilli || m <= -maxMilli {
		return m / 1000
	}
	return q.Value()
}

// addSat adds two values saturating at maxMilli.
func addSat(a, b int64) int64 {
	if s := a + b; s <= maxMilli && s >= -maxMilli {
		return s
	}
	if b > 0 {
		return maxMilli
	}
	return -maxMilli
}
