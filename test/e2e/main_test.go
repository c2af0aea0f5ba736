//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	cri "k8s.io/cri-api/pkg/apis"

	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
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
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e tests need root and a host prepared by `make setup`: run `sudo make test-e2e`")
		os.Exit(1)
	}
	if _, err := os.Stat(containerdSock); err != nil {
		fmt.Fprintf(os.Stderr, "containerd is not running at %s: run `sudo make setup` first\n", containerdSock)
		os.Exit(1)
	}
	if err := removeLeftovers(); err != nil {
		fmt.Fprintln(os.Stderr, "remove pods left by an interrupted run:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// removeLeftovers removes the test and benchmark pods an interrupted earlier run left behind, from both the
// built-in runtime's and the CRI plugin's namespaces, so that every run starts from the same host state.
func removeLeftovers() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := runtime.New(ctx, builtinConfig("/var/lib/nodeagent/e2e-leftovers", cniConfDir))
	if err != nil {
		return err
	}
	defer rt.Close()
	plugin, _, err := remote.Connect(containerdSock, time.Minute)
	if err != nil {
		return err
	}
	for _, svc := range []cri.RuntimeService{rt, plugin} {
		sbs, err := svc.ListPodSandbox(ctx, nil)
		if err != nil {
			return err
		}
		for _, sb := range sbs {
			if ns := sb.GetMetadata().GetNamespace(); ns != "e2e" && ns != "bench" {
				continue
			}
			if err := svc.StopPodSandbox(ctx, sb.Id); err != nil {
				return err
			}
			if err := svc.RemovePodSandbox(ctx, sb.Id); err != nil {
				return err
			}
		}
	}
	return nil
}
