package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
)

// fixture is a started Server with a CA, a pod "default/web" (container "app") and its logs.
type fixture struct {
	t       *testing.T
	srv     *Server
	ca      *auth.CA
	logsDir string
	reviews *fakeReviews

	mu    sync.Mutex
	pod   *v1.Pod
	check error
}

func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	dir := t.TempDir()
	ca := testCA(t)
	f := &fixture{t: t, ca: ca, logsDir: filepath.Join(dir, "logs"), pod: testPod(1)}
	f.reviews = newFakeReviews()
	cfg := Config{Addr: "127.0.0.1:0", HealthzAddr: "127.0.0.1:0", RootDir: dir, ClientCA: ca.CertPEM,
		LogsDir: f.logsDir, Pods: f.lookup, Hostnames: []string{"node-a"}, NodeName: "node-a",
		TokenReviews: f.reviews.tokens(), AccessReviews: f.reviews.access(),
		Checks: []Check{{Name: "syncloop", Func: func() error {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.check
		}}}}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		srv.Stop()
	})
	f.srv = srv
	return f
}

// testCA makes a cluster CA in a temporary directory.
func testCA(t *testing.T) *auth.CA {
	t.Helper()
	dir := t.TempDir()
	ca, err := auth.LoadOrCreateCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func (f *fixture) lookup(ns, name string) (*v1.Pod, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pod == nil || ns != f.pod.Namespace || name != f.pod.Name {
		return nil, false
	}
	return f.pod.DeepCopy(), true
}

func (f *fixture) writeLog(n int, content string) string {
	f.t.Helper()
	p := filepath.Join(f.logsDir, "default_web_uid-1", "app", fmt.Sprintf("%d.log", n))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// tlsConfig is a client TLS configuration trusting the server, with a client certificate for user in
// groups signed by ca (no certificate when ca is nil).
func (f *fixture) tlsConfig(ca *auth.CA, user string, groups ...string) *tls.Config {
	f.t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.srv.CertPEM())
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if ca != nil {
		certPEM, keyPEM, err := ca.Issue(user, groups, nil, time.Now(), time.Hour)
		if err != nil {
			f.t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			f.t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

func (f *fixture) client(ca *auth.CA, user string, groups ...string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: f.tlsConfig(ca, user, groups...)}}
}

func (f *fixture) admin() *http.Client {
	return f.client(f.ca, "kube-apiserver-kubelet-client", "system:masters")
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestHealthzIsOpen(t *testing.T) {
	f := newFixture(t, nil)
	if code, body := get(t, f.client(nil, ""), "https://"+f.srv.Addr()+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("anonymous /healthz: %d %q", code, body)
	}
}

func TestHealthzPlainHTTP(t *testing.T) {
	f := newFixture(t, nil)
	url := "http://" + f.srv.HealthzAddr() + "/healthz"
	if code, body := get(t, http.DefaultClient, url); code != http.StatusOK || body != "ok" {
		t.Errorf("healthy: %d %q", code, body)
	}
	f.mu.Lock()
	f.check = errors.New("sync loop stalled")
	f.mu.Unlock()
	if code, body := get(t, http.DefaultClient, url); code != http.StatusInternalServerError || !strings.Contains(body, "[-]syncloop failed: sync loop stalled") {
		t.Errorf("unhealthy: %d %q", code, body)
	}
	if code, _ := get(t, http.DefaultClient, "http://"+f.srv.HealthzAddr()+"/containerLogs/default/web/app"); code != http.StatusNotFound {
		t.Errorf("logs on the plain port: %d", code)
	}
}

func TestContainerLogs(t *testing.T) {
	f := newFixture(t, nil)
	f.writeLog(0, "2025-01-01T00:00:01Z stdout F first run\n2025-01-01T00:00:02Z stderr F crashed\n")
	f.writeLog(1, "2025-01-01T00:01:01Z stdout P second \n2025-01-01T00:01:02Z stdout F run\n2025-01-01T00:01:03Z stdout F up\n")
	base := "https://" + f.srv.Addr() + "/containerLogs/default/web/"
	tests := []struct {
		path string
		code int
		body string
	}{
		{"app", 200, "second run\nup\n"},
		{"app?previous=true", 200, "first run\ncrashed\n"},
		{"app?tailLines=1&timestamps=true", 200, "2025-01-01T00:01:03.000000000Z up\n"},
		{"app?limitBytes=3", 200, "sec"},
		{"db", 404, `container "db" not found in pod "web"`},
		{"app?tailLines=-2", 422, "tailLines must be greater than or equal to 0"},
		{"../other/app", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			code, body := get(t, f.admin(), base+tt.path)
			if code != tt.code || !strings.HasPrefix(body, tt.body) {
				t.Errorf("got %d %q, want %d %q", code, body, tt.code, tt.body)
			}
		})
	}
	if code, body := get(t, f.admin(), "https://"+f.srv.Addr()+"/containerLogs/default/nope/app"); code != 404 || !strings.Contains(body, `pod "nope" does not exist`) {
		t.Errorf("unknown pod: %d %q", code, body)
	}
}

func TestContainerLogsFollow(t *testing.T) {
	f := newFixture(t, nil)
	path := f.writeLog(1, "2025-01-01T00:01:01Z stdout F before\n")
	resp, err := f.admin().Get("https://" + f.srv.Addr() + "/containerLogs/default/web/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	read := func() string {
		t.Helper()
		l, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		return l
	}
	if l := read(); l != "before\n" {
		t.Fatalf("got %q", l)
	}
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	_, _ = fh.WriteString("2025-01-01T00:01:02Z stdout F after\n")
	if l := read(); l != "after\n" {
		t.Fatalf("got %q", l)
	}
	_, _ = fh.WriteString("2025-01-01T00:01:03Z stdout F exiting\n")
	f.mu.Lock()
	f.pod.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	f.mu.Unlock()
	rest, err := io.ReadAll(lines)
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != "exiting\n" {
		t.Errorf("after the container stopped: %q", rest)
	}
}

func TestSelfSignedCertificateIsKept(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Addr: "127.0.0.1:0", RootDir: dir, ClientCA: testCA(t).CertPEM, NodeName: "node-a",
		AccessReviews: newFakeReviews().access(),
		Pods:          func(string, string) (*v1.Pod, bool) { return nil, false }, Hostnames: []string{"node-a", "10.0.0.5"}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CertPEM(), b.CertPEM()) {
		t.Error("a second start made a new certificate")
	}
	leaf := a.cert.Leaf
	if leaf == nil || leaf.VerifyHostname("node-a") != nil || leaf.VerifyHostname("10.0.0.5") != nil || leaf.VerifyHostname("127.0.0.1") != nil {
		t.Errorf("certificate names: %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	if st, err := os.Stat(filepath.Join(dir, "pki", "kubelet.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", st, err)
	}
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Errorf("the serving certificate is a CA (IsCA %v, key usage %v)", leaf.IsCA, leaf.KeyUsage)
	}
	// A key left with a wider mode (by an earlier version) is restricted at the next start.
	if err := os.Chmod(filepath.Join(dir, "pki", "kubelet.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "pki", "kubelet.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file after a restart: %v %v", st, err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	pods := func(string, string) (*v1.Pod, bool) { return nil, false }
	ar := newFakeReviews().access()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no address", Config{ClientCA: []byte("x"), Pods: pods}, "HTTPS address is required"},
		{"neither CA nor token reviewer", Config{Addr: ":0", Pods: pods}, "client CA bundle or a token reviewer is required"},
		{"no access reviewer", Config{Addr: ":0", ClientCA: []byte("x"), Pods: pods, NodeName: "n"}, "access reviewer is required"},
		{"no node name", Config{Addr: ":0", ClientCA: []byte("x"), Pods: pods, AccessReviews: ar}, "node name is required"},
		{"CA not PEM", Config{Addr: ":0", ClientCA: []byte("junk"), Pods: pods, AccessReviews: ar, NodeName: "n"}, "no PEM certificate"},
		{"no pods", Config{Addr: ":0", ClientCA: []byte("x"), AccessReviews: ar, NodeName: "n"}, "pod lookup is required"},
		{"missing cert file", Config{Addr: ":0", ClientCA: testCA(t).CertPEM, Pods: pods, AccessReviews: ar, NodeName: "n", TLSCertFile: "/nonexistent", TLSKeyFile: "/nonexistent"}, "load serving certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// fakeStreaming answers exec with its command line, and port-forwards to an echo.
type fakeStreaming struct{}

type exitError struct{ code int }

func (e exitError) Error() string   { return fmt.Sprintf("exit %d", e.code) }
func (e exitError) String() string  { return e.Error() }
func (e exitError) Exited() bool    { return true }
func (e exitError) ExitStatus() int { return e.code }

func (fakeStreaming) Exec(_ context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	if len(cmd) > 0 && cmd[0] == "false" {
		return exitError{code: 3}
	}
	fmt.Fprintf(out, "%s: %s\n", id, strings.Join(cmd, " "))
	if in != nil {
		_, _ = io.Copy(out, in)
	}
	return nil
}

func (fakeStreaming) Attach(_ context.Context, id string, _ io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	fmt.Fprintf(out, "attached to %s\n", id)
	return nil
}

func (fakeStreaming) PortForward(_ context.Context, sandbox string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	fmt.Fprintf(stream, "%s:%d ", sandbox, port)
	_, err := io.Copy(stream, stream)
	return err
}

type fakeResolver struct{}

func (fakeResolver) ContainerID(_ context.Context, pod *v1.Pod, c string) (string, error) {
	if c != "app" {
		return "", fmt.Errorf("container %q: %w", c, ErrNotFound)
	}
	return "ctr-" + c, nil
}

func (fakeResolver) SandboxID(context.Context, *v1.Pod) (string, error) { return "sandbox-1", nil }

// Go's profiles are served to authenticated callers only, and never on the plain port.
func TestProfiles(t *testing.T) {
	f := newFixture(t, nil)
	base := "https://" + f.srv.Addr() + "/debug/pprof/"
	if code, body := get(t, f.admin(), base+"heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile:") {
		t.Errorf("heap profile: %d %.100q", code, body)
	}
	if code, body := get(t, f.admin(), base+"goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("goroutine profile: %d %.100q", code, body)
	}
	if code, _ := get(t, f.client(nil, ""), base+"heap"); code != http.StatusUnauthorized {
		t.Errorf("anonymous heap profile: %d, want 401", code)
	}
	if code, _ := get(t, http.DefaultClient, "http://"+f.srv.HealthzAddr()+"/debug/pprof/heap"); code != http.StatusNotFound {
		t.Errorf("heap profile on the plain port: %d, want 404", code)
	}
}
