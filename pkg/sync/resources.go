package podsync

import (
	"errors"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/status"
)

// Upstream's numbers for container resources.
const (
	minShares          = 2
	maxShares          = 262144
	sharesPerCPU       = 1024
	quotaPeriod        = 100000 // 100 ms in µs
	minQuota           = 1000   // 1 ms in µs
	guaranteedOOMScore = -997
	besteffortOOMScore = 1000
	burstableMinOOM    = 3
	burstableMaxOOM    = 999
)

var (
	defaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// milliToShares converts cpu millicores to cgroup v1 shares.
func milliToShares(milli int64) int64 {
	if milli <= 0 {
		return minShares
	}
	s := milli * sharesPerCPU / 1000
	return min(max(s, minShares), maxShares)
}

// milliToQuota converts a cpu limit in millicores to a CFS quota for quotaPeriod.
func milliToQuota(milli int64) int64 {
	if milli <= 0 {
		return 0
	}
	return max(milli*quotaPeriod/1000, minQuota)
}

// oomScoreAdj returns the container's OOM score adjustment from the pod's QoS class.
func oomScoreAdj(pod *v1.Pod, c *v1.Container, memCapacity int64) int64 {
	switch status.QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScore
	case v1.PodQOSBestEffort:
		return besteffortOOMScore
	}
	if memCapacity <= 0 {
		return burstableMaxOOM
	}
	req := int64(0)
	if q, ok := c.Resources.Requests[v1.ResourceMemory]; ok {
		req = podfacts.Value(q)
	}
	adj := 1000 - (1000*min(req, memCapacity))/memCapacity
	return min(max(adj, burstableMinOOM), burstableMaxOOM)
}

// containerResources builds the CRI resources of a container.
func (k *Kubelet) containerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq, hasReq := c.Resources.Requests[v1.ResourceCPU]
	cpuLim, hasLim := c.Resources.Limits[v1.ResourceCPU]
	switch {
	case hasReq:
		r.CpuShares = milliToShares(podfacts.MilliValue(cpuReq))
	case hasLim:
		r.CpuShares = milliToShares(podfacts.MilliValue(cpuLim))
	default:
		r.CpuShares = minShares
	}
	if hasLim {
		r.CpuPeriod = quotaPeriod
		r.CpuQuota = milliToQuota(podfacts.MilliValue(cpuLim))
	}
	if q, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = max(podfacts.Value(q), 0)
	}
	var memCapacity int64
	if k.cfg.NodeAllocatable != nil {
		if q, ok := k.cfg.NodeAllocatable()[v1.ResourceMemory]; ok {
			memCapacity = podfacts.Value(q)
		}
	}
	r.OomScoreAdj = oomScoreAdj(pod, c, memCapacity)
	return r
}

// containerSecurityContext builds the CRI security context: the container's settings over the pod's.
// Localhost seccomp profiles are files under seccompRoot (<root dir>/seccomp), as upstream resolves them; a
// profile path that would leave it is an error.
func containerSecurityContext(pod *v1.Pod, c *v1.Container, seccompRoot string) (*runtimeapi.LinuxContainerSecurityContext, error) {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		if psc.SeccompProfile != nil {
			p, err := securityProfile(psc.SeccompProfile, seccompRoot)
			if err != nil {
				return nil, fmt.Errorf("%w: pod securityContext.seccompProfile: %v", errConfigRef, err)
			}
			sc.Seccomp = p
		}
	}
	csc := c.SecurityContext
	if csc != nil {
		if csc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
		}
		if csc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
		}
		sc.Privileged = csc.Privileged != nil && *csc.Privileged
		sc.ReadonlyRootfs = csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem
		sc.NoNewPrivs = csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation
		if caps := csc.Capabilities; caps != nil {
			sc.Capabilities = &runtimeapi.Capability{}
			for _, a := range caps.Add {
				sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
			}
			for _, d := range caps.Drop {
				sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
			}
		}
		if csc.SeccompProfile != nil {
			p, err := securityProfile(csc.SeccompProfile, seccompRoot)
			if err != nil {
				return nil, fmt.Errorf("%w: container %q securityContext.seccompProfile: %v", errConfigRef, c.Name, err)
			}
			sc.Seccomp = p
		}
	}
	unmasked := csc != nil && csc.ProcMount != nil && *csc.ProcMount == v1.UnmaskedProcMount
	if !sc.Privileged && !unmasked {
		sc.MaskedPaths = defaultMaskedPaths
		sc.ReadonlyPaths = defaultReadonlyPaths
	}
	return sc, nil
}

// securityProfile maps a seccomp profile to CRI's. A Localhost profile names a file relative to root, as
// upstream's API validation and kubelet have it: an absolute path or one that climbs out with ".." is
// refused, never passed to the runtime to read.
func securityProfile(p *v1.SeccompProfile, root string) (*runtimeapi.SecurityProfile, error) {
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errors.New("localhostProfile must be set for type Localhost")
		}
		rel := *p.LocalhostProfile
		if filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("localhostProfile %q must be a path relative to %s that stays inside it", rel, root)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(root, rel)}, nil
	case v1.SeccompProfileTypeUnconfined, "":
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	return nil, fmt.Errorf("unknown seccomp profile type %q", p.Type)
}
