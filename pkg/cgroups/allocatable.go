package cgroups

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// ResourcePID is the node resource that counts process IDs (upstream's
// pidlimit.PIDs). Reserving it limits pids.max of the pods cgroup.
const ResourcePID v1.ResourceName = "pid"

// NodeAllocatable returns what pods may use: capacity minus kube-reserved,
// system-reserved and the hard eviction threshold, per resource, never
// below zero. Resources absent from capacity are absent from the result.
func NodeAllocatable(capacity, kubeReserved, systemReserved, evictionHard v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(capacity))
	for name, q := range capacity {
		v := q.DeepCopy()
		for _, minus := range []v1.ResourceList{kubeReserved, systemReserved, evictionHard} {
			if r, ok := minus[name]; ok {
				v.Sub(r)
			}
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[name] = v
	}
	return out
}

// podsCgroupConfig sizes the pods cgroup to node allocatable: cpu.shares
// from its CPU, the memory limit from its memory and pids.max from its
// process IDs, each only when allocatable has it.
func podsCgroupConfig(allocatable v1.ResourceList) *ResourceConfig {
	rc := &ResourceConfig{}
	if q, ok := allocatable[v1.ResourceCPU]; ok {
		shares := podfacts.MilliCPUToShares(q.MilliValue())
		rc.CPUShares = &shares
	}
	if q, ok := allocatable[v1.ResourceMemory]; ok {
		mem := q.Value()
		rc.Memory = &mem
	}
	if q, ok := allocatable[ResourcePID]; ok {
		pids := q.Value()
		rc.PidsLimit = &pids
	}
	return rc
}

// qosCgroupConfigs returns the settings of the Burstable and BestEffort
// cgroups as upstream's QoS container manager keeps them: BestEffort always
// gets 2 shares; Burstable gets the shares of the summed CPU requests of
// its pods (burstableMilliCPU). Both get unbounded huge pages of every
// host page size (hugePageSizes, in bytes), so the pod cgroups below them
// carry the huge page limits.
func qosCgroupConfigs(burstableMilliCPU int64, hugePageSizes []int64) (burstable, bestEffort *ResourceConfig) {
	unbounded := func() map[int64]int64 {
		m := make(map[int64]int64, len(hugePageSizes))
		for _, size := range hugePageSizes {
			m[size] = hugePagesUnbounded
		}
		return m
	}
	bShares := podfacts.MilliCPUToShares(burstableMilliCPU)
	beShares := uint64(podfacts.MinShares)
	return &ResourceConfig{CPUShares: &bShares, HugePageLimit: unbounded()},
		&ResourceConfig{CPUShares: &beShares, HugePageLimit: unbounded()}
}

// MachineCapacity reads the node's capacity from the host: CPUs usable by
// this process, MemTotal from meminfo, and kernel.pid_max. procRoot is
// normally "/proc".
func MachineCapacity(procRoot string) (v1.ResourceList, error) {
	mem, err := meminfoValue(filepath.Join(procRoot, "meminfo"), "MemTotal")
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "pid_max"))
	if err != nil {
		return nil, fmt.Errorf("read pid_max: %w", err)
	}
	pidMax, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("parse pid_max %q: %w", raw, err)
	}
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(int64(mem), resource.BinarySI),
		ResourcePID:       *resource.NewQuantity(pidMax, resource.DecimalSI),
	}, nil
}

// meminfoValue returns one field of /proc/meminfo in bytes.
func meminfoValue(path, key string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok || name != key {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		v, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse meminfo %s: %w", key, err)
		}
		if len(fields) > 1 && fields[1] == "kB" {
			v *= 1024
		}
		return v, nil
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	return 0, fmt.Errorf("meminfo has no %s", key)
}
