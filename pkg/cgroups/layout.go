package cgroups

import (
	"os"
	"path/filepath"
	"strings"
)

// layout maps cgroup names to directories for one host and driver.
type layout struct {
	root        string // mount root, /sys/fs/cgroup on a host
	mode        Mode
	driver      Driver
	controllers []string // controllers pods use; v1: one hierarchy each
}

// rel is the path of a cgroup under the root of a hierarchy.
func (l layout) rel(n cgroupName) string {
	if l.driver == DriverSystemd {
		return n.systemd()
	}
	return n.cgroupfs()
}

// parent is what the runtime is given as the cgroup parent of the pod's
// containers: the cgroupfs path, or the slice unit name for systemd.
func (l layout) parent(n cgroupName) string {
	if l.driver == DriverSystemd {
		return n.systemdUnit()
	}
	return n.cgroupfs()
}

// hierarchies returns the root directory of every hierarchy pods use,
// keyed by controller on v1 and by "" on v2.
func (l layout) hierarchies() map[string]string {
	if l.mode.unified() {
		return map[string]string{"": l.root}
	}
	out := make(map[string]string, len(l.controllers))
	for _, c := range l.controllers {
		out[c] = filepath.Join(l.root, c)
	}
	return out
}

// otherHierarchies returns, on v1, the root of every mounted hierarchy pods do not use for limits (devices,
// freezer, blkio, the named systemd hierarchy, a controller-less cgroup2 at unified/...). The runtime creates
// the pod's path in all of them when it places containers, so removal must look there too.
func (l layout) otherHierarchies() []string {
	if l.mode.unified() {
		return nil
	}
	used := map[string]bool{}
	for _, dir := range l.hierarchies() {
		used[dir] = true
	}
	entries, err := os.ReadDir(l.root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join(l.root, e.Name())
		// Co-mounted controllers appear as symlinks (cpu -> cpu,cpuacct); follow them once.
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		if used[dir] || !dirExists(dir) {
			continue
		}
		used[dir] = true
		out = append(out, dir)
	}
	return out
}

// paths returns the directories of a cgroup in every hierarchy, keyed like
// hierarchies (the form opencontainers/cgroups takes).
func (l layout) paths(n cgroupName) map[string]string {
	rel := l.rel(n)
	out := l.hierarchies()
	for k, dir := range out {
		out[k] = filepath.Join(dir, rel)
	}
	return out
}

// dir returns the directory of a cgroup in the hierarchy of one
// controller; on v2 the controller is ignored.
func (l layout) dir(n cgroupName, controller string) string {
	if l.mode.unified() {
		return filepath.Join(l.root, l.rel(n))
	}
	return filepath.Join(l.root, controller, l.rel(n))
}

// exists reports whether the cgroup exists in any hierarchy, so that a
// cgroup half made by a crash is still found and removed.
func (l layout) exists(n cgroupName) bool {
	for _, dir := range l.paths(n) {
		if dirExists(dir) {
			return true
		}
	}
	return false
}

// children returns the names of the sub-cgroups of n found in the hierarchy
// of controller, or in any hierarchy for "".
func (l layout) children(n cgroupName, controller string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for c, dir := range l.paths(n) {
		if controller != "" && c != controller {
			continue
		}
		entries, err := os.ReadDir(dir)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() && !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, e.Name())
			}
		}
	}
	return out, nil
}

// childName returns the cgroup name of a sub-cgroup directory of n.
func (l layout) childName(n cgroupName, dir string) cgroupName {
	if l.driver == DriverSystemd {
		unit := strings.TrimSuffix(dir, systemdSliceSuffix)
		if i := strings.LastIndex(unit, "-"); i >= 0 {
			unit = unit[i+1:]
		}
		return n.child(unescapeSystemd(unit))
	}
	return n.child(dir)
}
