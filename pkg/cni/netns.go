package cni

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted, shared with iproute2 (`ip netns`): where
// the netns library mounts them (/run/netns; /var/run is a link to /run on a usual host, not in every
// container).
const NetnsDir = "/run/netns"

// NetnsPath returns the path of the named network namespace name.
func NetnsPath(name string) string { return filepath.Join(NetnsDir, name) }

// CreateNetns creates a named network namespace with its loopback interface up and returns its path.
//
// The namespace is created on a dedicated OS thread that is thrown away afterwards, so no goroutine of the
// caller ever runs inside it.
func CreateNetns(name string) (string, error) {
	type result struct {
		path string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread stays locked and dies with this goroutine: it was moved into the new namespace.
		runtime.LockOSThread()
		path, err := createNetnsOnThread(name)
		ch <- result{path, err}
	}()
	r := <-ch
	return r.path, r.err
}

func createNetnsOnThread(name string) (string, error) {
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", NetnsDir, err)
	}
	h, err := netns.NewNamed(name)
	if err != nil {
		return "", fmt.Errorf("create network namespace %q: %w", name, err)
	}
	defer h.Close()
	path := NetnsPath(name)
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		_ = DeleteNetns(name) // undoing a half-made namespace; a leftover is removed with its sandbox
		return "", fmt.Errorf("bring up loopback in %q: %w", name, err)
	}
	return path, nil
}

// PinNetns binds the network namespace of process pid (a pause container that made its own, inside the
// pod's user namespace) at the named path, brings its loopback interface up and returns the path, as
// CreateNetns does for a namespace it makes. Nothing is left behind when it fails.
func PinNetns(name string, pid int) (_ string, retErr error) {
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", NetnsDir, err)
	}
	path := NetnsPath(name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", fmt.Errorf("create network namespace file %s: %w", path, err)
	}
	_ = f.Close() // an empty file to mount over; closing it cannot lose anything
	defer func() {
		if retErr != nil {
			_ = DeleteNetns(name) // undoing a half-made pin; a leftover is removed with its sandbox
		}
	}()
	if err := unix.Mount(fmt.Sprintf("/proc/%d/ns/net", pid), path, "none", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("bind the network namespace of process %d at %s: %w", pid, path, err)
	}
	err = DoInNetns(path, func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("bring up loopback in %q: %w", name, err)
	}
	return path, nil
}

// DeleteNetns unmounts and removes the named network namespace. A namespace that is already gone is not an
// error.
func DeleteNetns(name string) error {
	path := NetnsPath(name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount network namespace %q: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace %q: %w", name, err)
	}
	return nil
}

// DoInNetns runs fn on a locked OS thread inside the network namespace at path. Sockets fn creates stay in
// that namespace after it returns.
func DoInNetns(path string, fn func() error) error {
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer target.Close()
	errCh := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// If switching back fails the thread stays locked and is discarded when the goroutine ends.
		orig, err := netns.Get()
		if err != nil {
			errCh <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			errCh <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err == nil {
			runtime.UnlockOSThread()
		}
		errCh <- ferr
	}()
	return <-errCh
}
