package volume

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// MountsBelow returns the mount points at or below dir, in the order of /proc/self/mountinfo (parents before
// their children).
func MountsBelow(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	prefix := filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == prefix || strings.HasPrefix(mp, prefix+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return slices.Compact(out), nil
}

// HasMounts reports whether anything is mounted at or below dir (an unreadable mount table counts as yes:
// a caller about to remove dir must not reach into a mount).
func HasMounts(dir string) bool {
	m, err := MountsBelow(dir)
	return err != nil || len(m) > 0
}

// mounted reports whether path is a mount point. statx says so directly (STATX_ATTR_MOUNT_ROOT, Linux 5.8 and
// later), for tmpfs and bind mounts alike, without reading the whole mount table, which grows with every pod;
// older kernels fall back to the table.
func mounted(path string) bool {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_BASIC_STATS, &st)
	if err == nil && st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
	}
	if errors.Is(err, unix.ENOENT) {
		return false
	}
	m, err := MountsBelow(path)
	return err == nil && slices.Contains(m, filepath.Clean(path))
}

func unescapeMountPath(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}
