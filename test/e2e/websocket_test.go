//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
)

// adminKubeletConfig is a client configuration for the kubelet's endpoint with an admin certificate of the
// cluster CA (the kubelet's serving certificate is self-signed, so it is not verified).
func (n *node) adminKubeletConfig(t *testing.T) *rest.Config {
	t.Helper()
	certPEM, keyPEM, err := n.clusterCA(t).Issue("e2e-admin", []string{"system:masters"}, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: n.kubeletURL(t), TLSClientConfig: rest.TLSClientConfig{Insecure: true, CertData: certPEM, KeyData: keyPEM}}
}

// The kubelet's endpoint serves exec, attach and port-forward over WebSocket itself (v5.channel.k8s.io and
// the v4 port-forward channel protocol), as upstream's kubelet does, on both runtime backends: what
// kube-apiserver forwards unchanged and kubectl speaks.
func TestKubeletWebSocketStreaming(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		web := busyboxPod("ws", "sh", "-c", "mkdir -p /www; echo hello-from-pod > /www/index.html; exec httpd -f -p 8080 -h /www")
		cat := busyboxPod("ws-attach", "cat")
		cat.Spec.Containers[0].Stdin = true
		n.createPod(web)
		n.createPod(cat)
		n.waitPod("ws", 60*time.Second, "the pod ready", ready)
		n.waitPod("ws-attach", 60*time.Second, "the pod ready", ready)
		cfg := n.adminKubeletConfig(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()

		stream := func(path string, stdin string) (string, string, error) {
			u, _ := url.Parse(cfg.Host + path)
			ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
			if err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			opts := remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}
			if stdin != "" {
				opts.Stdin = strings.NewReader(stdin)
			}
			err = ex.StreamWithContext(ctx, opts)
			return out.String(), errb.String(), err
		}
		q := "command=sh&command=-c&command=" + url.QueryEscape("echo out; echo err >&2; cat") + "&input=1&output=1&error=1"
		out, errOut, err := stream("/exec/default/ws/main?"+q, "typed\n")
		if err != nil || out != "out\ntyped\n" || errOut != "err\n" {
			t.Errorf("WebSocket exec: stdout %q stderr %q err %v", out, errOut, err)
		}
		_, _, err = stream("/exec/default/ws/main?command=sh&command=-c&command=exit+3&output=1&error=1", "")
		var code exec.CodeExitError
		if !errors.As(err, &code) || code.Code != 3 {
			t.Errorf("WebSocket exec of exit 3: %v", err)
		}

		// A TTY takes the terminal size sent on the resize channel.
		u := cfg.Host + "/exec/default/ws/main?command=sh&command=-c&command=" + url.QueryEscape("sleep 1; stty size") + "&output=1&tty=1"
		ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u)
		if err != nil {
			t.Fatal(err)
		}
		var tty bytes.Buffer
		sizes := make(fixedSizes, 1)
		sizes <- remotecommand.TerminalSize{Width: 100, Height: 40}
		close(sizes)
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &tty, Tty: true, TerminalSizeQueue: sizes}); err != nil ||
			strings.TrimSpace(tty.String()) != "40 100" {
			t.Errorf("WebSocket exec with a TTY: %q, %v", tty.String(), err)
		}

		// Attach: what is typed reaches the container's cat, whose output comes back.
		attached := make(chan string, 1)
		go func() {
			u := cfg.Host + "/attach/default/ws-attach/main?input=1&output=1"
			ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u)
			if err != nil {
				attached <- err.Error()
				return
			}
			pr, pw := io.Pipe()
			var out syncBuffer
			go func() {
				_, _ = pw.Write([]byte("ping\n"))
				for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && !strings.Contains(out.String(), "ping"); {
					time.Sleep(50 * time.Millisecond)
				}
				pw.Close()
			}()
			actx, acancel := context.WithTimeout(ctx, 15*time.Second)
			defer acancel()
			_ = ex.StreamWithContext(actx, remotecommand.StreamOptions{Stdin: pr, Stdout: &out})
			attached <- out.String()
		}()
		if got := <-attached; !strings.Contains(got, "ping\n") {
			t.Errorf("WebSocket attach: %q", got)
		}

		// Port-forward: an HTTP request through the data channel of port 8080 reaches the pod's server.
		if got := wsPortForward(t, cfg, "/portForward/default/ws?port=8080", "GET / HTTP/1.0\r\n\r\n"); !strings.Contains(got, "hello-from-pod") {
			t.Errorf("WebSocket port-forward: %q", got)
		}
	})
}

// wsPortForward speaks the v4 port-forward WebSocket protocol to the kubelet: per port a data and an error
// channel, each first carrying the port number; it sends req on the data channel and returns what comes back.
func wsPortForward(t *testing.T, cfg *rest.Config, path, req string) string {
	t.Helper()
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	d := websocket.Dialer{
		TLSClientConfig:  &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}, //nolint:gosec // the kubelet's self-signed certificate
		Subprotocols:     []string{"v4.channel.k8s.io"},
		HandshakeTimeout: 10 * time.Second,
	}
	u := "wss" + strings.TrimPrefix(cfg.Host, "https") + path
	conn, resp, err := d.Dial(u, http.Header{})
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("dial %s: %v %s", u, err, status)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := 0; i < 2; i++ { // the port number on the data and the error channel
		_, msg, err := conn.ReadMessage()
		if err != nil || len(msg) != 3 || binary.LittleEndian.Uint16(msg[1:]) != 8080 {
			t.Fatalf("port prefix %d: %v %v", i, msg, err)
		}
	}
	if err := conn.WriteMessage(websocket.BinaryMessage, append([]byte{0}, req...)); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil || len(msg) == 0 {
			break
		}
		switch msg[0] {
		case 0:
			got.Write(msg[1:])
		case 1:
			if len(msg) > 1 {
				t.Errorf("port-forward error channel: %s", msg[1:])
			}
		}
		if strings.Contains(got.String(), "hello-from-pod") {
			break
		}
	}
	return got.String()
}

// fixedSizes hands the terminal sizes it holds to an executor, then none.
type fixedSizes chan remotecommand.TerminalSize

func (f fixedSizes) Next() *remotecommand.TerminalSize {
	s, ok := <-f
	if !ok {
		return nil
	}
	return &s
}
