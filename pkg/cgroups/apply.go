package cgroups

import (
	"fmt"
	"slices"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"github.com/opencontainers/cgroups/systemd"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// cgroupSpec is one cgroup to create, update or remove.
type cgroupSpec struct {
	name  cgroupName
	paths map[string]string // from layout.paths
	res   *ResourceConfig
}

// applier makes, sets and removes single cgroups. create makes the cgroup
// in every hierarchy (a no-op for what exists) and writes res; update only
// writes res; destroy removes the cgroup and any sub-cgroups left in it,
// which must hold no processes.
type applier interface {
	create(c cgroupSpec) error
	update(c cgroupSpec) error
	destroy(c cgroupSpec) error
}

// libApplier is the applier on the host hierarchy at /sys/fs/cgroup:
// opencontainers/cgroups' fs (v1), fs2 (v2) and systemd managers.
type libApplier struct {
	mode      Mode
	driver    Driver
	hugeSizes []int64 // host page sizes in bytes; empty without hugetlb
}

var _ applier = libApplier{}

func (a libApplier) manager(c cgroupSpec) (cgroups.Manager, *cgroups.Resources, error) {
	res, err := libResources(c.res, a.mode.unified(), a.hugeSizes)
	if err != nil {
		return nil, nil, err
	}
	cg := &cgroups.Cgroup{Resources: res}
	var m cgroups.Manager
	switch {
	case a.driver == DriverSystemd:
		cg.Name = c.name.systemdUnit()
		cg.Parent = c.name[:len(c.name)-1].systemdUnit()
		if a.mode.unified() {
			m, err = systemd.NewUnifiedManager(cg, "")
		} else {
			m, err = systemd.NewLegacyManager(cg, nil)
		}
	case a.mode.unified():
		m, err = fs2.NewManager(cg, c.paths[""])
	default:
		m, err = fs.NewManager(cg, c.paths)
	}
	if err != nil {
		return nil, nil, err
	}
	return m, res, nil
}

func (a libApplier) create(c cgroupSpec) error {
	m, res, err := a.manager(c)
	if err != nil {
		return err
	}
	if err := m.Apply(-1); err != nil {
		return err
	}
	return m.Set(res)
}

func (a libApplier) update(c cgroupSpec) error {
	m, res, err := a.manager(c)
	if err != nil {
		return err
	}
	return m.Set(res)
}

func (a libApplier) destroy(c cgroupSpec) error {
	m, _, err := a.manager(cgroupSpec{name: c.name, paths: c.paths, res: &ResourceConfig{}})
	if err != nil {
		return err
	}
	return m.Destroy()
}

// libResources converts a ResourceConfig to opencontainers/cgroups'
// Resources: shares become cpu.weight on v2; pids limits <= 0 become
// "max"; huge page limits are set for every host page size. Devices are
// left alone (pods' device rules belong to their containers).
func libResources(rc *ResourceConfig, unified bool, hugeSizes []int64) (*cgroups.Resources, error) {
	r := &cgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true}
	if rc == nil {
		return r, nil
	}
	if rc.CPUShares != nil {
		if unified {
			r.CpuWeight = podfacts.SharesToWeight(*rc.CPUShares)
		} else {
			r.CpuShares = *rc.CPUShares
		}
	}
	if rc.CPUQuota != nil {
		r.CpuQuota = *rc.CPUQuota
	}
	if rc.CPUPeriod != nil {
		r.CpuPeriod = *rc.CPUPeriod
	}
	if rc.Memory != nil {
		r.Memory = *rc.Memory
	}
	if rc.PidsLimit != nil {
		v := *rc.PidsLimit
		if v <= 0 {
			v = -1
		}
		r.PidsLimit = &v
	}
	if rc.HugePageLimit != nil {
		for _, size := range sortedSizes(hugeSizes) {
			name, err := HugePageSizeName(size)
			if err != nil {
				return nil, err
			}
			r.HugetlbLimit = append(r.HugetlbLimit, &cgroups.HugepageLimit{
				Pagesize: name, Limit: uint64(max(rc.HugePageLimit[size], 0)),
			})
		}
	}
	return r, nil
}

func sortedSizes(sizes []int64) []int64 {
	out := slices.Clone(sizes)
	slices.Sort(out)
	return out
}

// unsupportedHugePages returns an error naming any requested page size the
// host cannot limit.
func unsupportedHugePages(limits map[int64]int64, hugeSizes []int64) error {
	for size, v := range limits {
		if v == 0 || slices.Contains(hugeSizes, size) {
			continue
		}
		name, _ := HugePageSizeName(size)
		if len(hugeSizes) == 0 {
			return fmt.Errorf("%w: huge pages (%s) requested but the hugetlb controller is not available", ErrInvalidResources, name)
		}
		return fmt.Errorf("%w: huge page size %s is not supported by this host", ErrInvalidResources, name)
	}
	return nil
}
