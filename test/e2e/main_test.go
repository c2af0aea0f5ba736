//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"testing"
)

// Host paths hack/setup.sh creates.
const (
	containerdSock = "/run/nodeagent/containerd/containerd.sock"
	cniConfDir     = "/etc/nodeagent/cni/net.d"
	cniBinDir      = "/usr/lib/cni"
	cniNetwork     = "nodeagent"
	busyboxImage   = "localhost/busybox:1.35"
	pauseImage     = "localhost/pause:3.10"
	pauseArchive   = "/var/lib/nodeagent/images/pause.tar"
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e tests need root and a host prepared by `make setup`: run `sudo make test-e2e`")
		os.Exit(1)
	}
	if _, err := os.Stat(containerdSock); err != nil {
		fmt.Fprintf(os.Stderr, "containerd is not running at %s: run `sudo make setup` first\n", containerdSock)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
