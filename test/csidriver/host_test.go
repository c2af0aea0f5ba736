package csidriver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The tests that touch the host (mounts, loop devices) need root, and say so here, in one place: they skip
// otherwise. CI runs them as root.

// requireRoot skips the test unless it runs as root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the driver bind-mounts and attaches loop devices (CI runs this as root)")
	}
}

// hostTempDir makes a temporary directory for a test that mounts: a private mount of its own, so that the
// test's mounts do not propagate to the host's other mount namespaces. When the test ends, every loop device
// backed by a file in it is detached and every mount below it unmounted before it is removed; if a mount
// remains, the directory is left (removing it would reach into the mount) and the test fails.
func hostTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csidriver-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s onto itself: %v", dir, err)
	}
	t.Cleanup(func() { cleanHostDir(t, dir) })
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make %s a private mount: %v", dir, err)
	}
	return dir
}

func cleanHostDir(t *testing.T, dir string) {
	for _, dev := range loopDevicesBackedBelow(t, dir) {
		f, err := os.Open(dev)
		if err == nil {
			err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
			f.Close()
		}
		if err != nil {
			t.Errorf("detach %s: %v", dev, err)
		}
	}
	mounts, err := mountsBelow(dir)
	if err != nil {
		t.Errorf("list the mounts below %s: %v", dir, err)
		return
	}
	slices.Reverse(mounts) // children before their parents
	for _, m := range mounts {
		if err := unix.Unmount(m, 0); err != nil {
			t.Logf("unmount %s: %v; detaching it", m, err)
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", m, err)
			}
		}
	}
	if left, err := mountsBelow(dir); err != nil || len(left) > 0 {
		t.Errorf("mounts left below %s (%v), not removing it: %v", dir, err, left)
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("remove %s: %v", dir, err)
	}
}

// loopDevicesBackedBelow lists the loop devices whose backing file is below dir, as sysfs tells.
func loopDevicesBackedBelow(t *testing.T, dir string) []string {
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		t.Errorf("list loop devices: %v", err)
		return nil
	}
	var devs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		if strings.HasPrefix(strings.TrimSpace(string(b)), dir+"/") {
			devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return devs
}

// startDriver starts a driver with its state in dir/state, serving on dir/csi.sock, until the test ends.
// It returns the driver and its endpoint.
func startDriver(t *testing.T, dir string) (*Driver, string) {
	t.Helper()
	d, err := New(Config{NodeID: "test-node", StateDir: filepath.Join(dir, "state"), MaxVolumesPerNode: 16})
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "csi.sock")
	ln, err := ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return d, "unix://" + socket
}
