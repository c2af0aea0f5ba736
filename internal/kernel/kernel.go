package kernel

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// AtLeast reports whether the running kernel's release is major.minor or later. A release that cannot be
// read is an error.
func AtLeast(major, minor int) (bool, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false, err
	}
	return releaseAtLeast(unix.ByteSliceToString(u.Release[:]), major, minor)
}

// releaseAtLeast compares a release string ("6.18.44-fc-v1045") with major.minor.
func releaseAtLeast(release string, major, minor int) (bool, error) {
	var maj, min int
	if _, err := fmt.Sscanf(release, "%d.%d", &maj, &min); err != nil {
		return false, fmt.Errorf("kernel release %q: %w", release, err)
	}
	return maj > major || maj == major && min >= minor, nil
}
