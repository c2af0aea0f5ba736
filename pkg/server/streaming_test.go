package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clientportforward "k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/utils/exec"
)

// streamingFixture serves the streaming routes with a fake runtime; restConfig authenticates as the API
// server's kubelet client.
func streamingFixture(t *testing.T) (*fixture, *rest.Config) {
	t.Helper()
	f := newFixture(t, func(c *Config) {
		c.Streaming, c.Resolver = fakeStreaming{}, fakeResolver{}
	})
	certPEM, keyPEM, err := f.ca.Issue("kube-apiserver-kubelet-client", []string{"system:masters"}, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return f, &rest.Config{Host: "https://" + f.srv.Addr(),
		TLSClientConfig: rest.TLSClientConfig{CAData: f.srv.CertPEM(), CertData: certPEM, KeyData: keyPEM}}
}

func TestExecOverSPDY(t *testing.T) {
	f, cfg := streamingFixture(t)
	run := func(q string, stdin string) (string, error) {
		u, _ := url.Parse("https://" + f.srv.Addr() + "/exec/default/web/app?" + q)
		exec, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		opts := remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}
		if stdin != "" {
			opts.Stdin = strings.NewReader(stdin)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = exec.StreamWithContext(ctx, opts)
		return out.String(), err
	}
	out, err := run("command=echo&command=hi&output=1&error=1&input=1", "from stdin")
	if err != nil || out != "ctr-app: echo hi\nfrom stdin" {
		t.Errorf("exec: %q, %v", out, err)
	}
	_, err = run("command=false&output=1&error=1", "")
	if ee, ok := err.(utilexec.ExitError); !ok || ee.ExitStatus() != 3 {
		t.Errorf("exit code: %v (%T)", err, err)
	}
}

func TestStreamingRoutesRefuseBadRequests(t *testing.T) {
	f, _ := streamingFixture(t)
	base := "https://" + f.srv.Addr()
	tests := []struct {
		method, path string
		code         int
	}{
		{"POST", "/exec/default/web/app?command=ls", http.StatusBadRequest}, // no stream asked for
		{"POST", "/exec/default/nope/app?command=ls&output=1", http.StatusNotFound},
		{"POST", "/exec/default/web/wrong-uid/app?command=ls&output=1", http.StatusNotFound},
		{"POST", "/exec/default/web/db?command=ls&output=1", http.StatusNotFound},
		{"POST", "/attach/default/web/init?output=1", http.StatusNotFound}, // declared, but the runtime has none
		{"GET", "/portForward/default/nope", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base+tt.path, nil)
			resp, err := f.admin().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Errorf("got %d, want %d", resp.StatusCode, tt.code)
			}
		})
	}
	plain := newFixture(t, nil) // no streaming runtime
	resp, err := plain.admin().Post("https://"+plain.srv.Addr()+"/exec/default/web/app?command=ls&output=1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("without a runtime: %d", resp.StatusCode)
	}
}

func TestPortForwardOverSPDY(t *testing.T) {
	f, cfg := streamingFixture(t)
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("https://" + f.srv.Addr() + "/portForward/default/web")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := clientportforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:80"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port-forward: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("port-forward not ready")
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("ports: %v %v", ports, err)
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	want := "sandbox-1:80 ping"
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != want {
		t.Errorf("got %q, %v", buf, err)
	}
}
