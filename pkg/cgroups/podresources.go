package cgroups

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// ResourceConfig is what one cgroup is set to. A nil field leaves the
// kernel's value alone.
type ResourceConfig struct {
	// CPUShares is cpu.shares on v1, converted with podfacts.SharesToWeight on v2.
	CPUShares *uint64
	// CPUQuota is the CFS quota in microseconds per period; -1 is no quota.
	CPUQuota *int64
	// CPUPeriod is the CFS period in microseconds.
	CPUPeriod *uint64
	// Memory is the memory limit in bytes.
	Memory *int64
	// PidsLimit is pids.max; a value <= 0 is written as "max".
	PidsLimit *int64
	// HugePageLimit maps page size in bytes to a limit in bytes. When it
	// is not nil, every page size of the host is written: the listed ones
	// with their value, the others with 0.
	HugePageLimit map[int64]int64
}

// PodOptions are the node settings that shape a pod's cgroup.
type PodOptions struct {
	// DisableCPUQuota leaves CPU limits unenforced (--cpu-cfs-quota=false).
	DisableCPUQuota bool
	// CPUPeriod is the CFS period in microseconds; 0 means podfacts.QuotaPeriod.
	CPUPeriod uint64
	// PodPidsLimit is --pod-max-pids; a value <= 0 sets no limit.
	PodPidsLimit int64
}

// PodRequests sums a pod's requests as upstream does (component-helpers
// PodRequests): app containers and restartable init containers (sidecars)
// add up; each plain init container needs its own request plus the sidecars
// started before it; the pod needs the larger of the two. Pod-level
// requests replace the sum for CPU, memory and huge pages, and the pod
// overhead is added.
func PodRequests(pod *v1.Pod) v1.ResourceList {
	reqs := aggregate(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests }, nil)
	if pod.Spec.Resources != nil {
		applyPodLevel(reqs, pod.Spec.Resources.Requests)
	}
	addList(reqs, pod.Spec.Overhead)
	return reqs
}

// PodLimits sums a pod's limits the same way as PodRequests. Pod-level
// limits replace the sum, and the overhead is added to each non-zero limit.
func PodLimits(pod *v1.Pod) v1.ResourceList {
	lims, _, _ := podLimits(pod)
	return lims
}

// podLimits also reports whether every container, init containers
// included, declares a CPU and a memory limit (upstream's ContainerFn).
func podLimits(pod *v1.Pod) (lims v1.ResourceList, cpuDeclared, memDeclared bool) {
	cpuDeclared, memDeclared = true, true
	lims = aggregate(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits },
		func(effective v1.ResourceList) {
			if effective.Cpu().IsZero() {
				cpuDeclared = false
			}
			if effective.Memory().IsZero() {
				memDeclared = false
			}
		})
	if r := pod.Spec.Resources; r != nil && len(r.Limits) > 0 {
		applyPodLevel(lims, r.Limits)
		if !r.Limits.Cpu().IsZero() {
			cpuDeclared = true
		}
		if !r.Limits.Memory().IsZero() {
			memDeclared = true
		}
	}
	for name, q := range pod.Spec.Overhead {
		if v, ok := lims[name]; ok && !v.IsZero() {
			v.Add(q)
			lims[name] = v
		}
	}
	return lims, cpuDeclared, memDeclared
}

// aggregate applies the sidecar formula of KEP-753 to one resource list of
// each container. seen, when set, gets every container's effective list.
func aggregate(pod *v1.Pod, get func(*v1.Container) v1.ResourceList, seen func(v1.ResourceList)) v1.ResourceList {
	result := v1.ResourceList{}
	for i := range pod.Spec.Containers {
		list := get(&pod.Spec.Containers[i])
		addList(result, list)
		if seen != nil {
			seen(list)
		}
	}
	sidecars := v1.ResourceList{}
	inits := v1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var effective v1.ResourceList
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			addList(result, get(c))
			addList(sidecars, get(c))
			effective = sidecars
		} else {
			effective = v1.ResourceList{}
			addList(effective, get(c))
			addList(effective, sidecars)
		}
		if seen != nil {
			seen(effective)
		}
		maxList(inits, effective)
	}
	maxList(result, inits)
	return result
}

// applyPodLevel overrides the supported pod-level resources.
func applyPodLevel(list, podLevel v1.ResourceList) {
	for name, q := range podLevel {
		if name == v1.ResourceCPU || name == v1.ResourceMemory ||
			strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			list[name] = q.DeepCopy()
		}
	}
}

func addList(list, add v1.ResourceList) {
	for name, q := range add {
		v, ok := list[name]
		if !ok {
			list[name] = q.DeepCopy()
			continue
		}
		v.Add(q)
		list[name] = v
	}
}

func maxList(list, other v1.ResourceList) {
	for name, q := range other {
		if v, ok := list[name]; !ok || q.Cmp(v) > 0 {
			list[name] = q.DeepCopy()
		}
	}
}

// PodResourceConfig returns the settings of a pod's cgroup as upstream's
// ResourceConfigForPod: CPU shares from the summed CPU requests (2 for
// BestEffort); CFS quota and memory limit from the summed limits, for
// Guaranteed pods always and for Burstable pods only when every container
// declares that limit; huge page limits from the requests; pids.max from
// the node's pod pids limit.
func PodResourceConfig(pod *v1.Pod, opts PodOptions) *ResourceConfig {
	reqs := PodRequests(pod)
	lims, cpuDeclared, memDeclared := podLimits(pod)

	period := opts.CPUPeriod
	if period == 0 {
		period = podfacts.QuotaPeriod
	}
	shares := podfacts.MilliCPUToShares(reqs.Cpu().MilliValue())
	quota := podfacts.MilliCPUToQuota(lims.Cpu().MilliValue(), int64(period))
	if opts.DisableCPUQuota {
		quota = -1
	}
	memory := lims.Memory().Value()

	rc := &ResourceConfig{HugePageLimit: HugePageLimits(reqs)}
	switch podfacts.QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		rc.CPUShares, rc.CPUQuota, rc.CPUPeriod, rc.Memory = &shares, &quota, &period, &memory
	case v1.PodQOSBurstable:
		rc.CPUShares = &shares
		if cpuDeclared {
			rc.CPUQuota, rc.CPUPeriod = &quota, &period
		}
		if memDeclared {
			rc.Memory = &memory
		}
	default:
		minShares := uint64(podfacts.MinShares)
		rc.CPUShares = &minShares
	}
	if opts.PodPidsLimit > 0 {
		pids := opts.PodPidsLimit
		rc.PidsLimit = &pids
	}
	return rc
}
