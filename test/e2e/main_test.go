//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
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
	code := m.Run()
	if kubeletPath != "" { // the binaries built for this run (some 230 MB)
		_ = os.RemoveAll(filepath.Dir(kubeletPath))
	}
	// The parallel tests' slots go with the run; one still holding a container fails it.
	if err := removeSlots(); err != nil {
		fmt.Fprintln(os.Stderr, "remove the parallel tests' containerd namespaces and cgroups:", err)
		code = 1
	}
	os.Exit(code)
}

// removeLeftovers removes the test and benchmark pods an interrupted earlier run left behind, from both the
// built-in runtime's and the CRI plugin's namespaces, and every pod and then the namespaces and cgroups of
// the parallel tests' slots, so that every run starts from the same host state.
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
	svcs := []cri.RuntimeService{rt, plugin}
	c, err := containerd.New(containerdSock)
	if err != nil {
		return err
	}
	defer c.Close()
	slotNSs, err := slotNamespaces(ctx, c)
	if err != nil {
		return err
	}
	for _, ns := range slotNSs {
		cfg := builtinConfig("/var/lib/nodeagent/e2e-leftovers-"+ns, cniConfDir)
		cfg.Namespace = ns
		slot, err := runtime.New(ctx, cfg)
		if err != nil {
			return err
		}
		defer slot.Close()
		svcs = append(svcs, slot)
	}
	for i, svc := range svcs {
		sbs, err := svc.ListPodSandbox(ctx, nil)
		if err != nil {
			return err
		}
		for _, sb := range sbs {
			if ns := sb.GetMetadata().GetNamespace(); i < 2 && ns != "e2e" && ns != "bench" {
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
	if err := os.RemoveAll(slotLogsDir); err != nil {
		return err
	}
	return removeSlots()
}
