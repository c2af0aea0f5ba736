package volume

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// EnsureShared makes dir's mount shared, as upstream's kubelet makes its root directory: a CSI driver's pod
// mounts the kubelet's directory with Bidirectional propagation and mounts volumes below it, and those
// mounts reach the host only from a shared mount. When the mount dir is on is not shared (a host whose / is
// private), dir is bind-mounted onto itself and that mount made shared; a restarted kubelet finds it so and
// does nothing. It reports whether it mounted.
func EnsureShared(dir string) (bool, error) {
	dir = filepath.Clean(dir)
	shared, err := onSharedMount(dir)
	if err != nil || shared {
		return false, err
	}
	mountedHere := mounted(dir)
	if !mountedHere {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return false, fmt.Errorf("bind-mount %s onto itself: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return !mountedHere, fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	return !mountedHere, nil
}

// onSharedMount says whether the mount dir is on (the mount table's longest mount point above it) is shared.
func onSharedMount(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	best, shared := "", false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp != dir && mp != "/" && !strings.HasPrefix(dir, mp+"/") {
			continue
		}
		// A later line for the same mount point is mounted over the earlier one.
		if len(mp) >= len(best) {
			best, shared = mp, false
			for _, opt := range fields[6:] {
				if opt == "-" {
					break
				}
				if strings.HasPrefix(opt, "shared:") {
					shared = true
				}
			}
		}
	}
	return shared, sc.Err()
}
