package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

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

// noswapRefused is set once the kernel refused tmpfs's noswap option (before Linux 6.4, or inside a user
// namespace): later mounts go without it.
var noswapRefused atomic.Bool

func (hostMounter) MountTmpfs(dir string, size int64) error {
	return mountTmpfs(size, func(opts string) error {
		return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
	})
}

// mountTmpfs mounts a memory-backed volume with noswap where the kernel has it, as upstream's kubelet does
// (its content, secrets and tokens included, never reaches swap). A kernel without it answers EINVAL: the
// mount is made again without the option, and later ones go without it, as upstream's probe would decide.
func mountTmpfs(size int64, mount func(opts string) error) error {
	if noswapRefused.Load() {
		return mount(tmpfsOptions(size, false))
	}
	err := mount(tmpfsOptions(size, true))
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	if err := mount(tmpfsOptions(size, false)); err != nil {
		return err
	}
	noswapRefused.Store(true)
	return nil
}

// tmpfsOptions are the mount options of a memory-backed volume of size bytes (0: the kernel's default, half
// of memory).
func tmpfsOptions(size int64, noswap bool) string {
	opts := "mode=0755"
	if size > 0 {
		opts = fmt.Sprintf("size=%d,%s", size, opts)
	}
	if noswap {
		opts += ",noswap"
	}
	return opts
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
