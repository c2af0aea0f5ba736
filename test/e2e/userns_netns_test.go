//go:build e2e

package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeagent/kubelet/pkg/cni"
)

// The namespaces of a pod in a user namespace of its own, made before its pause container: the network
// namespace is owned by the user namespace made with it (so the pod's root may set its network sysctls), its
// loopback is up, and nothing stays when a step fails (a user namespace pin that cannot be made leaves no
// network namespace).
func TestNetnsInUserns(t *testing.T) {
	parallel(t)
	name := "e2e-userns-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	pin := filepath.Join(t.TempDir(), "userns")
	maps := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 3 << 16, Size: 1 << 16}}
	path, err := cni.CreateNetnsInUserns(name, pin, maps, maps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cni.DeleteNetns(name)
		_ = cni.UnbindNamespaceFile(pin)
	})
	netns, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer netns.Close()
	owner, err := unix.IoctlRetInt(int(netns.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		t.Fatalf("NS_GET_USERNS: %v", err)
	}
	defer unix.Close(owner)
	var ownerSt, pinSt unix.Stat_t
	if err := unix.Fstat(owner, &ownerSt); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(pin, &pinSt); err != nil {
		t.Fatal(err)
	}
	if ownerSt.Ino != pinSt.Ino {
		t.Errorf("the network namespace's owner is user namespace %d, the pinned one is %d", ownerSt.Ino, pinSt.Ino)
	}
	if err := cni.DoInNetns(path, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if lo.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("loopback is down: %v", lo.Attrs().Flags)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A pin path that is taken: an error, and no network namespace left behind.
	other := name + "-b"
	if _, err := cni.CreateNetnsInUserns(other, pin, maps, maps); err == nil {
		_ = cni.DeleteNetns(other)
		t.Fatal("made namespaces over a taken pin")
	}
	if _, err := os.Stat(cni.NetnsPath(other)); !os.IsNotExist(err) {
		t.Errorf("a failed call left %s: %v", cni.NetnsPath(other), err)
	}
}
