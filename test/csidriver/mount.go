package csidriver

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxStackedMounts bounds unmountAll: mounts stacked at one path by some earlier, non-idempotent caller.
const maxStackedMounts = 16

// bindMount bind-mounts source (a directory, or a file such as a device node) onto target, which must
// exist and be of the same kind.
func bindMount(source, target string) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s onto %s: %w", source, target, err)
	}
	return nil
}

// applyBindFlags remounts the bind mount at target with the flags want (from bindMountFlags), keeping the
// mount's own (see remountFlags). No flags, no remount: a bind mount starts read-write.
func applyBindFlags(target string, want uintptr) error {
	if want == 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", target, err)
	}
	if err := unix.Mount("", target, "", remountFlags(st.Flags, want), ""); err != nil {
		return fmt.Errorf("remount %s with flags %#x: %w", target, want, err)
	}
	return nil
}

// unmountAll unmounts whatever is mounted at target, stacked mounts included; a path not mounted, or gone,
// is no error.
func unmountAll(target string) error {
	for range maxStackedMounts {
		mounted, err := isMountPoint(target)
		if err != nil || !mounted {
			return err
		}
		if err := unix.Unmount(target, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("%s is still mounted after %d unmounts", target, maxStackedMounts)
}

// isMountPoint reports whether path is the root of a mount (a directory or a file bind-mounted there). statx
// says so directly (Linux 5.8 and later); older kernels fall back to the mount table. A path that does not
// exist is not a mount point.
func isMountPoint(path string) (bool, error) {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_BASIC_STATS, &st)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return false, nil
	case err == nil && st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0:
		return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	return inMountTable(path)
}

// inMountTable reports whether path is a mount point of /proc/self/mountinfo.
func inMountTable(path string) (bool, error) {
	mounts, err := mountPoints()
	if err != nil {
		return false, err
	}
	clean := filepath.Clean(path)
	for _, m := range mounts {
		if m == clean {
			return true, nil
		}
	}
	return false, nil
}

// mountPoints lists the mount points of /proc/self/mountinfo, parents before their children.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 5 {
			out = append(out, unescapeMountPath(fields[4]))
		}
	}
	return out, sc.Err()
}

// mountsBelow lists the mount points at or below dir.
func mountsBelow(dir string) ([]string, error) {
	all, err := mountPoints()
	if err != nil {
		return nil, err
	}
	prefix := filepath.Clean(dir)
	var out []string
	for _, m := range all {
		if m == prefix || strings.HasPrefix(m, prefix+"/") {
			out = append(out, m)
		}
	}
	return out, nil
}

func unescapeMountPath(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// sameFile reports whether a and b are the same file (device and inode), as a bind mount of b at a is.
// A path that does not exist is the same as nothing.
func sameFile(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	for _, s := range []struct {
		path string
		st   *unix.Stat_t
	}{{a, &sa}, {b, &sb}} {
		if err := unix.Stat(s.path, s.st); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				return false, nil
			}
			return false, fmt.Errorf("stat %s: %w", s.path, err)
		}
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}

// mountedFrom reports whether target is a mount point whose root is source (a bind mount of it).
func mountedFrom(target, source string) (bool, error) {
	mounted, err := isMountPoint(target)
	if err != nil || !mounted {
		return false, err
	}
	return sameFile(target, source)
}
