package criserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubelet/pkg/cri/streaming"
	utilexec "k8s.io/utils/exec"

	"github.com/nodeagent/kubelet/pkg/runtime"
)

// echoRuntime runs "exec" by writing its arguments to stdout and exiting with code.
type echoRuntime struct{ code int }

func (e echoRuntime) Exec(_ context.Context, _ string, cmd []string, _ io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	io.WriteString(out, strings.Join(cmd, " "))
	if e.code != 0 {
		return &runtime.ExitError{Code: e.code}
	}
	return nil
}

func (echoRuntime) Attach(context.Context, string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommand.TerminalSize) error {
	return errors.New("attach is not supported")
}

func (echoRuntime) PortForward(context.Context, string, int32, io.ReadWriteCloser) error {
	return errors.New("port-forward is not supported")
}

// published records what a StreamServer hands to its runtime.
type published struct {
	mu  sync.Mutex
	srv streaming.Server
}

func (p *published) set(s streaming.Server) { p.mu.Lock(); p.srv = s; p.mu.Unlock() }
func (p *published) get() streaming.Server  { p.mu.Lock(); defer p.mu.Unlock(); return p.srv }

func TestStreamServerExec(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
	}{
		{"success", 0},
		{"exit code", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pub published
			ss := newStreamServer(echoRuntime{code: tc.code}, pub.set, "")
			if err := ss.Start(); err != nil {
				t.Fatal(err)
			}
			defer ss.Stop()
			if !strings.HasPrefix(ss.URL(), "http://127.0.0.1:") || strings.HasSuffix(ss.URL(), ":0") {
				t.Errorf("URL %q, want loopback on a bound port", ss.URL())
			}
			if pub.get() == nil {
				t.Fatal("Start did not set the server on the runtime")
			}
			resp, err := pub.get().GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"echo", "hi"}, Stdout: true})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(resp.Url, ss.URL()+"/exec/") {
				t.Errorf("exec URL %q is not under %q", resp.Url, ss.URL())
			}
			u, err := url.Parse(resp.Url)
			if err != nil {
				t.Fatal(err)
			}
			exec, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
			if err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			err = exec.StreamWithContext(ctxT(t), remotecommand.StreamOptions{Stdout: &stdout})
			if stdout.String() != "echo hi" {
				t.Errorf("stdout %q, want %q", stdout.String(), "echo hi")
			}
			var exit utilexec.ExitError
			switch {
			case tc.code == 0 && err != nil:
				t.Errorf("exec: %v", err)
			case tc.code != 0 && (!errors.As(err, &exit) || exit.ExitStatus() != tc.code):
				t.Errorf("exec err %v, want exit code %d", err, tc.code)
			}

			if err := ss.Stop(); err != nil {
				t.Fatal(err)
			}
			if pub.get() != nil {
				t.Error("Stop left the server set on the runtime")
			}
		})
	}
}
