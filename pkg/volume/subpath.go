package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// ErrUnsafeSubPath marks a subPath that is absolute, climbs out of its volume, or runs through a symlink
// that leaves it or changes while it is opened.
var ErrUnsafeSubPath = errors.New("unsafe subPath")

// BindSubPath makes target show subPath of the volume at volumeDir, without a race with the pod's own
// containers, which can write the volume meanwhile (they could swap a directory of the path for a symlink to
// the host's /), as upstream's volume-subpaths do:
//
//   - missing directories of subPath are created inside the volume (never outside it, whatever the
//     containers do), with the volume's own mode;
//   - subPath is resolved once, and what it names must lie inside the volume (symlinks that stay inside are
//     followed, as upstream follows them);
//   - the resolved path is opened relative to the volume, one component at a time, refusing any symlink
//     (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it): a path changed since it
//     was resolved fails the open, and is retried by the next sync;
//   - what was opened is bind-mounted from /proc/self/fd onto target, a path the kubelet owns, which the
//     runtime then mounts into the container. A later change of the volume cannot change what target shows.
//
// target is made (a directory, or an empty file for a file) and any earlier mount on it is replaced.
func BindSubPath(volumeDir, subPath, target string) error {
	if subPath == "" || filepath.IsAbs(subPath) || !filepath.IsLocal(subPath) {
		return fmt.Errorf("%w: %q must be a relative path inside the volume", ErrUnsafeSubPath, subPath)
	}
	root, err := filepath.EvalSymlinks(volumeDir)
	if err != nil {
		return fmt.Errorf("resolve volume %s: %w", volumeDir, err)
	}
	missing, err := checkExistingPrefix(root, subPath)
	if err != nil {
		return err
	}
	if missing {
		fi, err := os.Stat(root)
		if err != nil {
			return fmt.Errorf("volume %s: %w", root, err)
		}
		if err := pathrs.MkdirAll(root, subPath, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("create subPath %q: %w", subPath, err)
		}
	}
	resolved, err := filepath.EvalSymlinks(filepath.Join(root, subPath))
	if err != nil {
		return fmt.Errorf("resolve subPath %q: %w", subPath, err)
	}
	rel, ok := inside(root, resolved)
	if !ok {
		return fmt.Errorf("%w: %q resolves to %s, outside the volume", ErrUnsafeSubPath, subPath, resolved)
	}
	fd, err := openBeneath(root, rel)
	if err != nil {
		return fmt.Errorf("%w: open %q in the volume: %v", ErrUnsafeSubPath, subPath, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat subPath %q: %w", subPath, err)
	}
	if err := makeMountPoint(target, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return err
	}
	source := fmt.Sprintf("/proc/self/fd/%d", fd)
	if err := unix.Mount(source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind subPath %q onto %s: %w", subPath, target, err)
	}
	return nil
}

// checkExistingPrefix resolves the part of subPath that exists, one component at a time, and refuses it
// when it leads out of root (or through a dangling symlink). It reports whether a part is missing.
func checkExistingPrefix(root, subPath string) (missing bool, err error) {
	cur := root
	for _, name := range strings.Split(filepath.Clean(subPath), "/") {
		next := filepath.Join(cur, name)
		resolved, err := filepath.EvalSymlinks(next)
		if errors.Is(err, os.ErrNotExist) {
			if fi, lerr := os.Lstat(next); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
				return false, fmt.Errorf("%w: %q runs through the dangling symlink %s", ErrUnsafeSubPath, subPath, next)
			}
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("resolve subPath %q: %w", subPath, err)
		}
		if _, ok := inside(root, resolved); !ok {
			return false, fmt.Errorf("%w: %q leads to %s, outside the volume", ErrUnsafeSubPath, subPath, resolved)
		}
		cur = resolved
	}
	return false, nil
}

// inside returns p relative to root when p is root or lies below it.
func inside(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || !filepath.IsLocal(rel) {
		return "", false
	}
	return rel, true
}

// openBeneath opens rel below root as an O_PATH descriptor, refusing symlinks in every component and any
// way out of root.
func openBeneath(root, rel string) (int, error) {
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootFd)
	if rel == "." {
		return unix.Open(root, unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	fd, err := unix.Openat2(rootFd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if !errors.Is(err, unix.ENOSYS) {
		return fd, err
	}
	return openWalk(rootFd, rel)
}

// openWalk is openBeneath for kernels without openat2: one component at a time with O_NOFOLLOW, each checked
// not to be a symlink.
func openWalk(rootFd int, rel string) (int, error) {
	cur, err := unix.Dup(rootFd)
	if err != nil {
		return -1, err
	}
	for _, name := range strings.Split(rel, "/") {
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			unix.Close(cur)
			return -1, unix.EXDEV
		}
		next, err := unix.Openat(cur, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(next)
			return -1, unix.ELOOP
		}
		cur = next
	}
	return cur, nil
}

// makeMountPoint makes target a directory or an empty file, unmounting what an earlier bind left there.
func makeMountPoint(target string, dir bool) error {
	for mounted(target) {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount earlier subPath mount %s: %w", target, err)
		}
	}
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() != dir {
		if err := os.Remove(target); err != nil {
			return fmt.Errorf("replace subPath mount point %s: %w", target, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("create subPath mount point: %w", err)
	}
	if dir {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create subPath mount point: %w", err)
		}
		return nil
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY|unix.O_NOFOLLOW, 0o640)
	if err != nil {
		return fmt.Errorf("create subPath mount point: %w", err)
	}
	return f.Close()
}

// CleanSubPaths unmounts every subPath bind below dir (a pod's volume-subpaths directory) and removes the
// directory, never following a link out of it. A missing dir is not an error.
func CleanSubPaths(dir string) error {
	mounts, err := MountsBelow(dir)
	if err != nil {
		return err
	}
	for i := len(mounts) - 1; i >= 0; i-- { // deepest first
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmount subPath %s: %w", mounts[i], err)
		}
	}
	if left, err := MountsBelow(dir); err != nil || len(left) > 0 {
		return fmt.Errorf("subPath mounts left below %s: %v %v", dir, left, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
