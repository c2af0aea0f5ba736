//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodeagent/kubelet/pkg/runtime"
)

// syncBuffer is a bytes.Buffer safe for the runtime's copy goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) Close() error { return nil }
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The built-in runtime's interactive calls, as the kubelet's endpoint streams them: exec with stdin and a
// resized TTY, attach to a container's own stdio, and port-forward into the pod's network namespace.
func TestStreamingCalls(t *testing.T) {
	b := builtinBackend(t)
	streamer := b.rt.(*runtime.Runtime).Streamer()
	p := runPod(t, b, "stream", nil)

	t.Run("exec with stdin", func(t *testing.T) {
		id := p.start(t, containerConfig("sleeper", "sleep", "3600"))
		var out, errOut syncBuffer
		err := streamer.Exec(ctxT(t), id, []string{"sh", "-c", "read x; echo got-$x; echo oops >&2; exit 2"},
			strings.NewReader("hello\n"), &out, &errOut, false, nil)
		var exit *runtime.ExitError
		if err == nil || !errors.As(err, &exit) || exit.Code != 2 {
			t.Fatalf("exec error %v, want exit code 2", err)
		}
		if out.String() != "got-hello\n" || errOut.String() != "oops\n" {
			t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
		}
	})

	// The end of the caller's stdin reaches the process, as with `kubectl exec -i pod -- sh < script`.
	t.Run("exec reading stdin to its end", func(t *testing.T) {
		id := p.start(t, containerConfig("cat", "sleep", "3600"))
		var out syncBuffer
		ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
		defer cancel()
		if err := streamer.Exec(ctx, id, []string{"sh", "-c", "cat; echo end"}, strings.NewReader("line one\nline two\n"), &out, nil, false, nil); err != nil {
			t.Fatalf("exec: %v", err)
		}
		if out.String() != "line one\nline two\nend\n" {
			t.Fatalf("stdout %q", out.String())
		}
	})

	t.Run("exec with a resized tty", func(t *testing.T) {
		id := p.start(t, containerConfig("tty", "sleep", "3600"))
		resize := make(chan remotecommand.TerminalSize, 1)
		resize <- remotecommand.TerminalSize{Width: 123, Height: 45}
		close(resize)
		var out syncBuffer
		if err := streamer.Exec(ctxT(t), id, []string{"sh", "-c", "sleep 0.5; stty size"}, nil, &out, nil, true, resize); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(out.String()); got != "45 123" {
			t.Fatalf("stty size %q, want \"45 123\"", got)
		}
	})

	t.Run("attach", func(t *testing.T) {
		cfg := containerConfig("echoer", "sh", "-c", "while read l; do echo got-$l; done")
		cfg.Stdin = true
		id := p.start(t, cfg)
		pr, pw := io.Pipe()
		var out syncBuffer
		ctx, cancel := context.WithCancel(ctxT(t))
		done := make(chan error, 1)
		go func() { done <- streamer.Attach(ctx, id, pr, &out, &out, false, nil) }()
		eventually(t, 10*time.Second, "attached echo", func() error {
			_, _ = pw.Write([]byte("ping\n"))
			if !strings.Contains(out.String(), "got-ping") {
				return fmt.Errorf("output so far %q", out.String())
			}
			return nil
		})
		cancel()
		_ = pw.Close()
		<-done
	})

	t.Run("port-forward", func(t *testing.T) {
		p.start(t, containerConfig("web", "sh", "-c", "mkdir -p /www && echo forwarded > /www/index.html && exec httpd -f -p 8080 -h /www"))
		eventually(t, 15*time.Second, "GET through port-forward", func() error {
			client, server := net.Pipe()
			go func() { _ = streamer.PortForward(ctxT(t), p.id, 8080, server) }()
			defer client.Close()
			_ = client.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := client.Write([]byte("GET /index.html HTTP/1.0\r\nHost: pod\r\n\r\n")); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(client), nil)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			if strings.TrimSpace(string(body)) != "forwarded" {
				return fmt.Errorf("body %q", body)
			}
			return nil
		})
	})
}
