package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// fileApplier is the applier for a cgroup root other than the host's
// /sys/fs/cgroup, which opencontainers/cgroups does not manage. It writes
// the same files, in the same order and format, with plain file I/O.
type fileApplier struct {
	layout    layout
	hugeSizes []int64
}

var _ applier = fileApplier{}

// fileWrite is one value written to one cgroup file.
type fileWrite struct {
	controller string // v1 hierarchy; "" on v2
	file       string
	value      string
}

// resourceFiles lists the files a ResourceConfig writes, in order.
func resourceFiles(rc *ResourceConfig, unified bool, hugeSizes []int64) ([]fileWrite, error) {
	res, err := libResources(rc, unified, hugeSizes)
	if err != nil {
		return nil, err
	}
	var out []fileWrite
	add := func(controller, file, value string) {
		if unified {
			controller = ""
		}
		out = append(out, fileWrite{controller, file, value})
	}
	if unified {
		if res.CpuWeight != 0 {
			add("cpu", "cpu.weight", strconv.FormatUint(res.CpuWeight, 10))
		}
		if res.CpuQuota != 0 || res.CpuPeriod != 0 {
			quota := "max"
			if res.CpuQuota > 0 {
				quota = strconv.FormatInt(res.CpuQuota, 10)
			}
			period := res.CpuPeriod
			if period == 0 {
				period = podfacts.QuotaPeriod
			}
			add("cpu", "cpu.max", quota+" "+strconv.FormatUint(period, 10))
		}
	} else {
		if res.CpuShares != 0 {
			add("cpu", "cpu.shares", strconv.FormatUint(res.CpuShares, 10))
		}
		if res.CpuPeriod != 0 {
			add("cpu", "cpu.cfs_period_us", strconv.FormatUint(res.CpuPeriod, 10))
		}
		if res.CpuQuota != 0 {
			add("cpu", "cpu.cfs_quota_us", strconv.FormatInt(res.CpuQuota, 10))
		}
	}
	if res.Memory != 0 {
		file, value := "memory.limit_in_bytes", strconv.FormatInt(res.Memory, 10)
		if unified {
			file = "memory.max"
			if res.Memory < 0 {
				value = "max"
			}
		}
		add("memory", file, value)
	}
	if res.PidsLimit != nil {
		value := "max"
		if *res.PidsLimit > 0 {
			value = strconv.FormatInt(*res.PidsLimit, 10)
		}
		add("pids", "pids.max", value)
	}
	suffix := ".limit_in_bytes"
	if unified {
		suffix = ".max"
	}
	for _, h := range res.HugetlbLimit {
		add("hugetlb", "hugetlb."+h.Pagesize+suffix, strconv.FormatUint(h.Limit, 10))
	}
	return out, nil
}

func (a fileApplier) create(c cgroupSpec) error {
	if a.layout.mode.unified() {
		if err := a.mkdirV2(c.paths[""]); err != nil {
			return err
		}
	} else {
		for controller, dir := range c.paths {
			if err := a.mkdirV1(controller, dir); err != nil {
				return err
			}
		}
	}
	return a.update(c)
}

func (a fileApplier) update(c cgroupSpec) error {
	writes, err := resourceFiles(c.res, a.layout.mode.unified(), a.hugeSizes)
	if err != nil {
		return err
	}
	for i, w := range writes {
		dir, ok := c.paths[w.controller]
		if !ok {
			return fmt.Errorf("cannot set %s: controller %s not in use", w.file, w.controller)
		}
		err := writeFile(dir, w.file, w.value)
		if errors.Is(err, syscall.EINVAL) && w.file == "cpu.cfs_period_us" && i+1 < len(writes) &&
			writes[i+1].file == "cpu.cfs_quota_us" {
			// A shorter period can be refused until the quota fits it:
			// set the quota first, then the period again.
			if err = writeFile(dir, writes[i+1].file, writes[i+1].value); err == nil {
				err = writeFile(dir, w.file, w.value)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// mkdirV1 makes every missing level of dir in one v1 hierarchy. A new
// cpuset cgroup gets its parent's CPUs and memory nodes, without which the
// kernel refuses tasks in it.
func (a fileApplier) mkdirV1(controller, dir string) error {
	top := filepath.Join(a.layout.root, controller)
	return mkdirLevels(top, dir, func(parent, child string) error {
		if controller != "cpuset" {
			return nil
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, _ := os.ReadFile(filepath.Join(child, f))
			if strings.TrimSpace(string(cur)) != "" {
				continue
			}
			v, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				return fmt.Errorf("read parent %s: %w", f, err)
			}
			if err := writeFile(child, f, strings.TrimSpace(string(v))); err != nil {
				return err
			}
		}
		return nil
	})
}

// mkdirV2 makes every missing level of dir, enabling the controllers pods
// use in the subtree_control of each level above it.
func (a fileApplier) mkdirV2(dir string) error {
	enable := make([]string, 0, len(a.layout.controllers))
	for _, c := range a.layout.controllers {
		enable = append(enable, "+"+c)
	}
	var levels []string
	for d := dir; d != a.layout.root && strings.HasPrefix(d, a.layout.root+"/"); d = filepath.Dir(d) {
		levels = append(levels, filepath.Dir(d))
	}
	for i := len(levels) - 1; i >= 0; i-- {
		if err := os.MkdirAll(levels[i], 0o755); err != nil {
			return fmt.Errorf("make cgroup: %w", err)
		}
		if err := writeFile(levels[i], "cgroup.subtree_control", strings.Join(enable, " ")); err != nil {
			// Enable what can be enabled; a missing controller
			// shows up when its limit is written.
			for _, e := range enable {
				_ = writeFile(levels[i], "cgroup.subtree_control", e)
			}
		}
	}
	return mkdirLevels(a.layout.root, dir, nil)
}

// mkdirLevels makes each missing directory from top (exclusive) down to
// dir, calling made for each new one.
func mkdirLevels(top, dir string, made func(parent, child string) error) error {
	rel, err := filepath.Rel(top, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("cgroup %s is not below %s", dir, top)
	}
	cur := top
	for part := range strings.SplitSeq(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, part)
		err := os.Mkdir(cur, 0o755)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("make cgroup: %w", err)
		}
		if made != nil {
			if err := made(parent, cur); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a fileApplier) destroy(c cgroupSpec) error {
	var errs []error
	for _, dir := range c.paths {
		if err := RemoveDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveDir removes a cgroup and its sub-cgroups, deepest first; one already gone is not an error. A
// cgroupfs directory is removed with its interface files; a plain
// directory (ENOTEMPTY, which cgroupfs never returns) has its files
// removed first.
func RemoveDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove cgroup: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := RemoveDir(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	err = syscall.Rmdir(dir)
	if errors.Is(err, syscall.ENOTEMPTY) {
		for _, e := range entries {
			if e.Type().IsRegular() {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
		err = syscall.Rmdir(dir)
	}
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// writeFile writes one value to a cgroup file, as a shell redirect does.
func writeFile(dir, file, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("set %s: %w", file, err)
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("set %s to %q: %w", file, value, err)
	}
	return nil
}
