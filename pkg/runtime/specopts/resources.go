package specopts

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WithResources sets CPU, memory, hugepage and unified cgroup limits from the CRI resources. A memory
// limit without a swap limit caps memory+swap at the same value where the host accounts swap, so a
// container does not swap by default (as containerd's CRI plugin). Hugepage limits are left out on a host
// without the hugetlb controller.
func WithResources(res *runtimeapi.LinuxContainerResources) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
		if res == nil {
			return nil
		}
		r := linuxResources(s)
		if r.CPU == nil {
			r.CPU = &runtimespec.LinuxCPU{}
		}
		if r.Memory == nil {
			r.Memory = &runtimespec.LinuxMemory{}
		}
		if p := uint64(res.GetCpuPeriod()); p != 0 {
			r.CPU.Period = &p
		}
		if q := res.GetCpuQuota(); q != 0 {
			r.CPU.Quota = &q
		}
		if sh := uint64(res.GetCpuShares()); sh != 0 {
			r.CPU.Shares = &sh
		}
		if cpus := res.GetCpusetCpus(); cpus != "" {
			r.CPU.Cpus = cpus
		}
		if mems := res.GetCpusetMems(); mems != "" {
			r.CPU.Mems = mems
		}
		limit, swap := res.GetMemoryLimitInBytes(), res.GetMemorySwapLimitInBytes()
		if limit != 0 {
			r.Memory.Limit = &limit
			if swap == 0 && SwapControllerAvailable() {
				r.Memory.Swap = &limit
			}
		}
		if swap != 0 && SwapControllerAvailable() {
			r.Memory.Swap = &swap
		}
		// Without the hugetlb controller the limits are left out, as containerd's CRI plugin does by default
		// (tolerate_missing_hugetlb_controller): upstream's kubelet sends one per page size the node has,
		// zero when the pod asks for none.
		if hp := res.GetHugepageLimits(); len(hp) > 0 && hugetlbAvailable() {
			for _, l := range hp {
				r.HugepageLimits = append(r.HugepageLimits, runtimespec.LinuxHugepageLimit{Pagesize: l.GetPageSize(), Limit: l.GetLimit()})
			}
		}
		if u := res.GetUnified(); u != nil {
			if r.Unified == nil {
				r.Unified = map[string]string{}
			}
			maps.Copy(r.Unified, u)
		}
		return nil
	}
}

// WithDefaultSandboxShares gives the pause container its small CPU weight.
func WithDefaultSandboxShares(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
	r := linuxResources(s)
	if r.CPU == nil {
		r.CPU = &runtimespec.LinuxCPU{}
	}
	shares := uint64(DefaultSandboxCPUShares)
	r.CPU.Shares = &shares
	return nil
}

func linuxResources(s *runtimespec.Spec) *runtimespec.LinuxResources {
	if s.Linux == nil {
		s.Linux = &runtimespec.Linux{}
	}
	if s.Linux.Resources == nil {
		s.Linux.Resources = &runtimespec.LinuxResources{}
	}
	return s.Linux.Resources
}

// SwapControllerAvailable says whether this host accounts swap in its memory cgroups (cgroup v1's
// memory.memsw files, cgroup v2's memory.swap.max); it is looked at once.
var SwapControllerAvailable = sync.OnceValue(func() bool {
	p := "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"
	if cgroups.Mode() == cgroups.Unified {
		// The root has no memory.swap.max; the cgroup of this process does.
		_, self, err := cgroups.ParseCgroupFileUnified("/proc/self/cgroup")
		if err != nil {
			return false
		}
		p = filepath.Join("/sys/fs/cgroup", self, "memory.swap.max")
	}
	_, err := os.Stat(p)
	return err == nil
})

var hugetlbAvailable = sync.OnceValue(func() bool {
	if cgroups.Mode() == cgroups.Unified {
		b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		return err == nil && strings.Contains(string(b), "hugetlb")
	}
	_, err := os.Stat("/sys/fs/cgroup/hugetlb")
	return err == nil
})

// WithSysctls adds the pod's sysctls to the spec.
func WithSysctls(sysctls map[string]string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
		if s.Linux == nil {
			s.Linux = &runtimespec.Linux{}
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		maps.Copy(s.Linux.Sysctl, sysctls)
		return nil
	}
}

// WithPodNamespaces joins the sandbox's network, IPC and UTS namespaces, and the PID namespace of
// targetPid (the sandbox's, or another container's for a debug target) unless the container asks
// for its own. A pod in a user namespace of its own (hostUsers: false) joins the sandbox's, with the
// pod's mappings.
func WithPodNamespaces(sc *runtimeapi.LinuxContainerSecurityContext, sandboxPid, targetPid uint32) oci.SpecOpts {
	ns := sc.GetNamespaceOptions()
	opts := []oci.SpecOpts{
		oci.WithLinuxNamespace(runtimespec.LinuxNamespace{Type: runtimespec.NetworkNamespace, Path: nsPath(sandboxPid, "net")}),
		oci.WithLinuxNamespace(runtimespec.LinuxNamespace{Type: runtimespec.IPCNamespace, Path: nsPath(sandboxPid, "ipc")}),
		oci.WithLinuxNamespace(runtimespec.LinuxNamespace{Type: runtimespec.UTSNamespace, Path: nsPath(sandboxPid, "uts")}),
	}
	if ns.GetPid() != runtimeapi.NamespaceMode_CONTAINER {
		opts = append(opts, oci.WithLinuxNamespace(runtimespec.LinuxNamespace{Type: runtimespec.PIDNamespace, Path: nsPath(targetPid, "pid")}))
	}
	uids, gids, err := PodUserNamespace(ns)
	if err != nil {
		return func(context.Context, oci.Client, *containers.Container, *runtimespec.Spec) error { return err }
	}
	if uids != nil {
		opts = append(opts, WithUserNamespace(uids, gids, nsPath(sandboxPid, "user")))
	}
	return oci.Compose(opts...)
}

func nsPath(pid uint32, kind string) string { return fmt.Sprintf("/proc/%d/ns/%s", pid, kind) }
