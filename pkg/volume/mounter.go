package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Mounter mounts and unmounts what volumes need. The host's (hostMounter) makes real mounts; tests use a
// fake.
type Mounter interface {
	// MountTmpfs mounts a tmpfs of size bytes (0: the kernel's default) on dir.
	MountTmpfs(dir string, size int64) error
	// Bind bind-mounts source onto target, read-only when asked.
	Bind(source, target string, readOnly bool) error
	// Unmount unmounts what is mounted on dir; nothing mounted there is not an error.
	Unmount(dir string) error
	// IsMountPoint reports whether something is mounted on dir.
	IsMountPoint(dir string) bool
}

type hostMounter struct{}

func (hostMounter) MountTmpfs(dir string, size int64) error {
	opts := "mode=0755"
	if size > 0 {
		opts = fmt.Sprintf("size=%d,mode=0755", size)
	}
	return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

func (hostMounter) Bind(source, target string, readOnly bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if !readOnly {
		return nil
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return errors.Join(err, unix.Unmount(target, unix.MNT_DETACH))
	}
	return nil
}

func (hostMounter) Unmount(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

func (hostMounter) IsMountPoint(dir string) bool { return mounted(dir) }

// chownTree gives every file and directory below dir (links themselves, never their targets) the group gid,
// as upstream applies a pod's fsGroup to its volumes.
func chownTree(dir string, gid int64) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(gid)); err != nil {
			return fmt.Errorf("set the group of %s: %w", p, err)
		}
		return nil
	})
}
