package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mode is the layout of the host's cgroup hierarchies.
type Mode int

const (
	// ModeUnknown is the zero Mode.
	ModeUnknown Mode = iota
	// ModeV1 has one hierarchy per controller, at <root>/<controller>.
	ModeV1
	// ModeHybrid is ModeV1 plus a cgroup2 hierarchy at <root>/unified;
	// pods are managed in the v1 hierarchies, as upstream does.
	ModeHybrid
	// ModeV2 has the single unified hierarchy at <root>.
	ModeV2
)

func (m Mode) String() string {
	switch m {
	case ModeV1:
		return "v1"
	case ModeHybrid:
		return "hybrid"
	case ModeV2:
		return "v2"
	}
	return "unknown"
}

// unified reports whether pods are managed in a cgroup2 hierarchy.
func (m Mode) unified() bool { return m == ModeV2 }

// Driver is how cgroups are created: by writing cgroupfs directly, or by
// asking systemd for slices.
type Driver string

const (
	// DriverCgroupfs writes the cgroup filesystem; the default.
	DriverCgroupfs Driver = "cgroupfs"
	// DriverSystemd asks systemd (PID 1) for slices.
	DriverSystemd Driver = "systemd"
)

// ParseDriver parses --cgroup-driver; the empty string is cgroupfs.
func ParseDriver(s string) (Driver, error) {
	switch Driver(s) {
	case "", DriverCgroupfs:
		return DriverCgroupfs, nil
	case DriverSystemd:
		return DriverSystemd, nil
	}
	return "", fmt.Errorf("%w: cgroup driver %q: want %q or %q", ErrConfig, s, DriverCgroupfs, DriverSystemd)
}

// Controllers of the v1 hierarchies the pods cgroups live in. The required
// ones must be mounted; the optional ones are used when they are.
var (
	requiredV1 = []string{"cpu", "cpuacct", "memory", "pids"}
	optionalV1 = []string{"cpuset", "hugetlb", "freezer", "blkio"}
	requiredV2 = []string{"cpu", "memory", "pids"}
	optionalV2 = []string{"cpuset", "hugetlb", "io"}
)

// DetectMode finds the layout of the hierarchies under root (normally
// /sys/fs/cgroup) from the files the kernel puts there: cgroup.controllers
// at the root is v2; a v1 controller directory with a cgroup2 hierarchy at
// root/unified is hybrid; a v1 controller directory alone is v1.
func DetectMode(root string) (Mode, error) {
	if fileExists(filepath.Join(root, "cgroup.controllers")) {
		return ModeV2, nil
	}
	v1 := slices.ContainsFunc(append(slices.Clone(requiredV1), optionalV1...), func(c string) bool {
		return dirExists(filepath.Join(root, c))
	})
	if !v1 {
		return ModeUnknown, fmt.Errorf("%w: no cgroup hierarchy under %s", ErrHostUnsupported, root)
	}
	if fileExists(filepath.Join(root, "unified", "cgroup.controllers")) {
		return ModeHybrid, nil
	}
	return ModeV1, nil
}

// detectControllers returns the controllers pods will use under root, and
// an error naming every required controller that is missing.
func detectControllers(root string, mode Mode) ([]string, error) {
	var have func(string) bool
	required, optional := requiredV1, optionalV1
	if mode.unified() {
		required, optional = requiredV2, optionalV2
		raw, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("read root controllers: %w", err)
		}
		enabled := strings.Fields(string(raw))
		have = func(c string) bool { return slices.Contains(enabled, c) }
	} else {
		have = func(c string) bool { return dirExists(filepath.Join(root, c)) }
	}
	var out, missing []string
	for _, c := range required {
		if !have(c) {
			missing = append(missing, c)
		}
		out = append(out, c)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: cgroup %s controller(s) %s not available under %s",
			ErrHostUnsupported, mode, strings.Join(missing, ", "), root)
	}
	for _, c := range optional {
		if have(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// checkWritable fails when a hierarchy the pods cgroups go into cannot be
// written (a read-only mount, or no permission), before anything is made.
// The error is one line naming every such hierarchy.
func checkWritable(dirs []string, access func(string) error) error {
	var bad []string
	var first error
	for _, d := range dirs {
		if err := access(d); err != nil {
			bad = append(bad, d)
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		return nil
	}
	return fmt.Errorf("%w: %s: %w", ErrNotWritable, strings.Join(bad, ", "), first)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
