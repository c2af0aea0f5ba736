package cgroups

import (
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

// PodResourceConfig returns the settings of a pod's cgroup as upstream's
// ResourceConfigForPod: CPU shares from the summed CPU requests (2 for
// BestEffort); CFS quota and memory limit from the summed limits, for
// Guaranteed pods always and for Burstable pods only when every container
// declares that limit; huge page limits from the requests; pids.max from
// the node's pod pids limit.
func PodResourceConfig(pod *v1.Pod, opts PodOptions) *ResourceConfig {
	reqs := podfacts.PodRequestList(pod)
	lims, cpuDeclared, memDeclared := podfacts.PodLimitList(pod)

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
