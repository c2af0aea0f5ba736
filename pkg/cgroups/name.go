package cgroups

import (
	"fmt"
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	podCgroupPrefix    = "pod"
	burstableCgroup    = "burstable"
	bestEffortCgroup   = "besteffort"
	systemdSliceSuffix = ".slice"
	// DefaultCgroupRoot is the cgroupfs path of the pods cgroup, upstream's
	// "kubepods" under the root of the hierarchy.
	DefaultCgroupRoot = "/kubepods"
)

// cgroupName is a driver-neutral cgroup name: its components from the root,
// such as {"kubepods", "burstable", "pod<uid>"}. The cgroupfs driver joins
// them with "/", the systemd driver turns them into nested slices.
type cgroupName []string

// parseCgroupfsName splits a cgroupfs path ("/kubepods/burstable") into a
// name. It rejects relative paths and components a path must not carry.
func parseCgroupfsName(p string) (cgroupName, error) {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return nil, fmt.Errorf("cgroup path %q must be absolute and clean", p)
	}
	var name cgroupName
	for part := range strings.SplitSeq(p, "/") {
		if part == "" {
			continue
		}
		if part == "." || part == ".." {
			return nil, fmt.Errorf("cgroup path %q must not contain %q", p, part)
		}
		name = append(name, part)
	}
	return name, nil
}

func (n cgroupName) child(part string) cgroupName {
	out := make(cgroupName, 0, len(n)+1)
	out = append(out, n...)
	return append(out, part)
}

// cgroupfs returns the path under the root of a hierarchy, "/a/b".
func (n cgroupName) cgroupfs() string {
	return "/" + strings.Join(n, "/")
}

// escapeSystemd makes one component fit a systemd unit name: "-" separates
// slice levels in systemd, so it becomes "_" (upstream's escaping).
func escapeSystemd(part string) string {
	return strings.ReplaceAll(part, "-", "_")
}

// unescapeSystemd reverses escapeSystemd.
func unescapeSystemd(part string) string {
	return strings.ReplaceAll(part, "_", "-")
}

// systemdUnit returns the slice unit of the name,
// "kubepods-burstable-pod<uid>.slice", or "-.slice" for the root.
func (n cgroupName) systemdUnit() string {
	if len(n) == 0 {
		return "-" + systemdSliceSuffix
	}
	parts := make([]string, len(n))
	for i, p := range n {
		parts[i] = escapeSystemd(p)
	}
	return strings.Join(parts, "-") + systemdSliceSuffix
}

// systemd returns the path of the slice under the root of a hierarchy,
// "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice".
func (n cgroupName) systemd() string {
	if len(n) == 0 {
		return "/"
	}
	var b strings.Builder
	for i := range n {
		b.WriteString("/")
		b.WriteString(n[:i+1].systemdUnit())
	}
	return b.String()
}

// qosName returns the name of the cgroup that holds pods of a QoS class.
func qosName(root cgroupName, qos v1.PodQOSClass) cgroupName {
	switch qos {
	case v1.PodQOSBurstable:
		return root.child(burstableCgroup)
	case v1.PodQOSBestEffort:
		return root.child(bestEffortCgroup)
	default:
		return root
	}
}

// podName returns the name of a pod's cgroup under its QoS class.
func podName(root cgroupName, qos v1.PodQOSClass, uid types.UID) cgroupName {
	return qosName(root, qos).child(podCgroupPrefix + string(uid))
}

// podUIDFromDir returns the pod UID a cgroup directory name stands for:
// "pod<uid>" for cgroupfs, "<parent>-pod<uid>.slice" for systemd.
func podUIDFromDir(driver Driver, dir string) (types.UID, bool) {
	if driver == DriverSystemd {
		unit, ok := strings.CutSuffix(dir, systemdSliceSuffix)
		if !ok {
			return "", false
		}
		if i := strings.LastIndex(unit, "-"); i >= 0 {
			unit = unit[i+1:]
		}
		dir = unescapeSystemd(unit)
	}
	uid, ok := strings.CutPrefix(dir, podCgroupPrefix)
	if !ok || uid == "" {
		return "", false
	}
	return types.UID(uid), true
}
