//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime"
)

// A restarted built-in runtime finds its sandboxes and containers again in containerd, keeps copying their
// output to their logs, and records exits it did not see.
func TestBuiltinRuntimeRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := builtinConfig(dir, cniConfDir)
	start := func() *runtime.Runtime {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rt, err := runtime.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	first := start()
	b := backend{name: "builtin", rt: first, images: first, ns: "nodeagent"}
	p := runPod(t, b, "restart", nil)
	ticker := p.start(t, containerConfig("ticker", "sh", "-c", "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.1; done"))
	short := p.start(t, containerConfig("short", "sh", "-c", "sleep 1; exit 4"))
	time.Sleep(300 * time.Millisecond)
	first.Close()

	time.Sleep(1500 * time.Millisecond) // "short" exits while no runtime watches
	second := start()
	defer second.Close()
	p.b = backend{name: "builtin", rt: second, images: second, ns: "nodeagent"}

	ctrs, err := second.ListContainers(ctxT(t), &runtimeapi.ContainerFilter{PodSandboxId: p.id})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]runtimeapi.ContainerState{}
	for _, c := range ctrs {
		states[c.Id] = c.State
	}
	if states[ticker] != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("ticker after restart: %v, want running", states[ticker])
	}
	st, err := second.ContainerStatus(ctxT(t), short, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.ExitCode != 4 {
		t.Errorf("short after restart: %v exit %d, want exited 4", st.Status.State, st.Status.ExitCode)
	}

	logPath := filepath.Join(p.cfg.LogDirectory, "ticker/0.log")
	size := func() int {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), "tick-")
	}
	n := size()
	eventually(t, 5*time.Second, "log grows after restart", func() error {
		if size() <= n+3 {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err := second.StopContainer(ctxT(t), ticker, 1); err != nil {
		t.Fatal(err)
	}
	if st := waitExited(t, p.b, ticker, 5*time.Second); st.ExitCode != 137 && st.ExitCode != 143 {
		t.Errorf("ticker exit %d after stop", st.ExitCode)
	}
	p.remove(t)
}

// The built-in runtime lists sandboxes and containers from memory; what another client does in containerd (a
// second runtime instance here, `ctr` for a user) still shows in its lists within moments.
func TestBuiltinRuntimeListsOtherClientsWrites(t *testing.T) {
	a := builtinBackend(t)
	b := builtinBackend(t)
	p := runPod(t, b, "otherwriter", nil)
	ctr := p.start(t, containerConfig("app", "sleep", "3600"))
	listed := func(rt backend) func() error {
		return func() error {
			sbs, err := rt.rt.ListPodSandbox(ctxT(t), &runtimeapi.PodSandboxFilter{Id: p.id})
			if err != nil {
				return err
			}
			cs, err := rt.rt.ListContainers(ctxT(t), &runtimeapi.ContainerFilter{Id: ctr})
			if err != nil {
				return err
			}
			if len(sbs) != 1 || len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				return fmt.Errorf("sandboxes %v containers %v", sbs, cs)
			}
			return nil
		}
	}
	eventually(t, 3*time.Second, "the other instance's pod in the list", listed(a))

	if err := b.rt.StopContainer(ctxT(t), ctr, 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the container exited in the list", func() error {
		cs, err := a.rt.ListContainers(ctxT(t), &runtimeapi.ContainerFilter{Id: ctr})
		if err != nil {
			return err
		}
		if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
			return fmt.Errorf("containers %v", cs)
		}
		return nil
	})

	// A record removed behind the runtime's back, as `ctr containers delete` does: it refuses while the task
	// is there (the runtime deletes an exited container's task after announcing the exit), and a record
	// deleted before its task would leave the task behind in containerd, where nothing can delete it.
	cc := containerdClient(t)
	eventually(t, 5*time.Second, "the exited container's record deleted as ctr deletes it", func() error {
		nsctx := namespaces.WithNamespace(ctxT(t), "nodeagent")
		c, err := cc.LoadContainer(nsctx, ctr)
		if err != nil {
			return err
		}
		return c.Delete(nsctx)
	})
	for _, rt := range []backend{a, b} {
		eventually(t, 3*time.Second, "the deleted container gone from the list", func() error {
			cs, err := rt.rt.ListContainers(ctxT(t), &runtimeapi.ContainerFilter{PodSandboxId: p.id})
			if err != nil {
				return err
			}
			if len(cs) != 0 {
				return fmt.Errorf("containers %v", cs)
			}
			return nil
		})
	}
	p.remove(t)
	eventually(t, 3*time.Second, "the removed sandbox gone from the other instance's list", func() error {
		sbs, err := a.rt.ListPodSandbox(ctxT(t), &runtimeapi.PodSandboxFilter{Id: p.id})
		if err != nil {
			return err
		}
		if len(sbs) != 0 {
			return fmt.Errorf("sandboxes %v", sbs)
		}
		return nil
	})
}
