//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/criserver"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// grpcBackend is the built-in runtime served on a CRI socket (with its streaming server) and dialled like any
// remote runtime: what crictl and CRI validation suites see.
func grpcBackend(t *testing.T) backend {
	t.Helper()
	rt, ok := builtinBackend(t).rt.(*runtime.Runtime)
	if !ok {
		t.Fatal("the built-in backend is not a *runtime.Runtime")
	}
	stream := criserver.NewStreamServer(rt, "")
	if err := stream.Start(); err != nil {
		t.Fatalf("start CRI streaming server: %v", err)
	}
	t.Cleanup(func() { stream.Stop() })

	socket := filepath.Join(t.TempDir(), "cri.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- criserver.New(rt, rt).Serve(ctx, socket) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve CRI: %v", err)
		}
	})
	eventually(t, 10*time.Second, "CRI socket "+socket, func() error {
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("serve CRI: %v", err)
		default:
		}
		_, err := os.Stat(socket)
		return err
	})
	rs, is, err := remote.Connect(socket, 30*time.Second)
	if err != nil {
		t.Fatalf("connect to the CRI socket: %v", err)
	}
	t.Cleanup(func() { rs.Close(); is.Close() })
	return backend{name: "builtin-grpc", rt: rs, images: is, ns: "nodeagent"}
}

// A pod runs through the CRI socket: lifecycle, logs, status codes, ExecSync exit codes, and an exec session
// on the streaming URL the runtime hands out.
func TestGRPCBackendSmoke(t *testing.T) {
	b := grpcBackend(t)
	p := runPod(t, b, "grpc-smoke", nil)
	id := p.start(t, containerConfig("hi", "echo", "hi"))
	if st := waitExited(t, b, id, 20*time.Second); st.ExitCode != 0 || st.Reason != "Completed" {
		t.Errorf("exit %d reason %q, want 0 Completed", st.ExitCode, st.Reason)
	}
	logPath := filepath.Join(p.cfg.LogDirectory, "hi/0.log")
	eventually(t, 5*time.Second, "log line", func() error {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), " stdout F hi\n") {
			return fmt.Errorf("log %q lacks the CRI-format line", b)
		}
		return nil
	})
	if _, err := b.rt.ContainerStatus(ctxT(t), "no-such-container", false); status.Code(err) != codes.NotFound {
		t.Errorf("status of a missing container: %v, want NotFound", err)
	}

	sleeper := p.start(t, containerConfig("sleeper", "sleep", "3600"))
	_, _, err := b.rt.ExecSync(ctxT(t), sleeper, []string{"sh", "-c", "exit 7"}, 10*time.Second)
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 7 {
		t.Errorf("ExecSync exit 7: %v, want exit code 7", err)
	}

	resp, err := b.rt.Exec(ctxT(t), &runtimeapi.ExecRequest{
		ContainerId: sleeper, Cmd: []string{"sh", "-c", "echo exec-out; echo exec-err >&2; exit 5"}, Stdout: true, Stderr: true,
	})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctxT(t), remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	if !errors.As(err, &exit) || exit.ExitStatus() != 5 {
		t.Errorf("exec session: %v, want exit code 5", err)
	}
	if stdout.String() != "exec-out\n" || stderr.String() != "exec-err\n" {
		t.Errorf("exec session output %q / %q", stdout.String(), stderr.String())
	}
}
