package podsync

import (
	"errors"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

var (
	defaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// containerResources builds the CRI resources of a container.
func (k *Kubelet) containerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq, hasReq := c.Resources.Requests[v1.ResourceCPU]
	cpuLim, hasLim := c.Resources.Limits[v1.ResourceCPU]
	switch {
	case hasReq:
		r.CpuShares = int64(podfacts.MilliCPUToShares(podfacts.MilliValue(cpuReq)))
	case hasLim:
		r.CpuShares = int64(podfacts.MilliCPUToShares(podfacts.MilliValue(cpuLim)))
	default:
		r.CpuShares = podfacts.MinShares
	}
	if hasLim {
		r.CpuPeriod = podfacts.QuotaPeriod
		r.CpuQuota = podfacts.MilliCPUToQuota(podfacts.MilliValue(cpuLim), podfacts.QuotaPeriod)
	}
	if q, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = max(podfacts.Value(q), 0)
	}
	// As upstream, the score is relative to the machine's memory, not to what pods may allocate.
	var memCapacity int64
	capacity := k.cfg.NodeAllocatable
	if k.cfg.NodeCapacity != nil {
		capacity = k.cfg.NodeCapacity
	}
	if capacity != nil {
		if q, ok := capacity()[v1.ResourceMemory]; ok {
			memCapacity = podfacts.Value(q)
		}
	}
	r.OomScoreAdj = int64(podfacts.ContainerOOMScoreAdj(pod, c, memCapacity))
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
