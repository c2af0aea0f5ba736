//go:build e2e

package e2e

import (
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// shimsOf counts the containerd shim processes serving the given namespace and, when id is set, the pod or
// container of that ID (the shim's -id).
func shimsOf(t *testing.T, ns, id string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.HasSuffix(args[0], "containerd-shim-runc-v2") {
			continue
		}
		if flagValue(args, "-namespace") == ns && (id == "" || flagValue(args, "-id") == id) {
			n++
		}
	}
	return n
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// The built-in runtime serves a whole pod (pause plus its containers) from one containerd shim.
func TestOneShimPerPod(t *testing.T) {
	b := builtinBackend(t)
	before := shimsOf(t, b.ns, "")
	p := runPod(t, b, "shim", nil)
	p.start(t, containerConfig("one", "sleep", "3600"))
	p.start(t, containerConfig("two", "sleep", "3600"))
	if got := shimsOf(t, b.ns, "") - before; got != 1 {
		t.Fatalf("a pod with two containers added %d shims, want 1", got)
	}
}

// The runtime asks a removed pod's shim to exit (containerd 2.x can leave one behind when many pods are
// deleted at once). The shim is found by the name it gives its socket, and Shutdown never stops a shim that
// still serves a container: the pod runs on after one. Once the pod is removed its shim is gone.
func TestShimShutdownOnlyWhenIdle(t *testing.T) {
	b := builtinBackend(t)
	p := runPod(t, b, "reap", nil)
	cid := p.start(t, containerConfig("app", "sleep", "3600"))
	sum := sha256.Sum256([]byte(filepath.Join(containerdSock, b.ns, p.id)))
	sock := fmt.Sprintf("/run/containerd/s/%x", sum)
	conn, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		t.Fatalf("the pod's shim socket %s: %v", sock, err)
	}
	client := ttrpc.NewClient(conn)
	defer client.Close()
	if err := client.Call(ctxT(t), "containerd.task.v3.Task", "Shutdown", &taskv2.ShutdownRequest{ID: p.id}, &emptypb.Empty{}); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	time.Sleep(time.Second)
	st, err := b.rt.ContainerStatus(ctxT(t), cid, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("the container after its shim was asked to shut down: %v, %v", st.GetStatus().GetState(), err)
	}
	if n := shimsOf(t, b.ns, p.id); n != 1 {
		t.Fatalf("%d shims for the live pod after Shutdown, want 1", n)
	}
	p.remove(t)
	eventually(t, 10*time.Second, "the removed pod's shim gone", func() error {
		if n := shimsOf(t, b.ns, p.id); n != 0 {
			return fmt.Errorf("%d shims left", n)
		}
		if _, err := os.Stat(sock); err == nil {
			return fmt.Errorf("socket %s left", sock)
		}
		return nil
	})
}
