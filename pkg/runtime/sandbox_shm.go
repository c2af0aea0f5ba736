package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// sandboxShmSize is the size of a pod's /dev/shm, as containerd's CRI plugin and dockershim make it.
const sandboxShmSize = 64 << 20

const devShm = "/dev/shm"

// shmDir is where a sandbox's /dev/shm lives on the host: one tmpfs per pod that every container of the pod
// mounts, so that they share POSIX shared memory as they share the IPC namespace. A host-IPC pod uses the
// host's /dev/shm.
func shmDir(sandboxDir string, hostIPC bool) string {
	if hostIPC {
		return devShm
	}
	return filepath.Join(sandboxDir, "shm")
}

// mountSandboxShm mounts the pod's /dev/shm tmpfs.
func mountSandboxShm(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create pod /dev/shm: %w", err)
	}
	data := fmt.Sprintf("mode=1777,size=%d", sandboxShmSize)
	if err := unix.Mount("shm", dir, "tmpfs", unix.MS_NOEXEC|unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mount pod /dev/shm at %s: %w", dir, err)
	}
	return nil
}

// unmountSandboxShm unmounts the pod's /dev/shm; one not mounted (or already gone) is not an error.
func unmountSandboxShm(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount pod /dev/shm at %s: %w", dir, err)
}
