package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeAPIServer is a script standing in for bin/apiserver: it records its arguments, then, as FAKE_MODE says,
// fails at start or writes the node kubeconfig (after FAKE_DELAY seconds) and serves until SIGTERM.
const fakeAPIServer = `#!/bin/sh
echo "$@" > "$FAKE_ARGS"
for a in "$@"; do
	case "$prev" in --node-kubeconfig) kc="${a#*=}";; esac
	prev="$a"
done
if [ "$FAKE_MODE" = fail ]; then echo "apiserver: listen: address already in use" >&2; exit 1; fi
sleep "${FAKE_DELAY:-0}"
cat > "$kc.tmp" <<END
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:7443", certificate-authority-data: "Y2EtcGVt"}
users:
- name: u
  user: {token: "t"}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
END
mv "$kc.tmp" "$kc"
trap 'exit 0' TERM
while :; do sleep 0.05; done
`

func fakeOptions(t *testing.T, mode string) *options {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "apiserver")
	if err := os.WriteFile(bin, []byte(fakeAPIServer), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_MODE", mode)
	t.Setenv("FAKE_ARGS", filepath.Join(dir, "args"))
	o := defaultOptions()
	o.apiserverBinary = bin
	o.apiserverDir = filepath.Join(dir, "data")
	o.adminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	o.verbosity = "2"
	if err := os.MkdirAll(o.apiserverDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestChildAPIServerStartsAndStops(t *testing.T) {
	o := fakeOptions(t, "serve")
	t.Setenv("FAKE_DELAY", "0.3")
	// A kubeconfig left by an earlier run is not taken for the new server's.
	stale := filepath.Join(o.apiserverDir, "kubelet.kubeconfig")
	if err := os.WriteFile(stale, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg, child, err := startChildAPIServer(ctx, o, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:7443" || cfg.QPS >= 0 || string(cfg.CAData) != "ca-pem" {
		t.Errorf("config host %q QPS %v CA %q, want the child's kubeconfig, not rate-limited", cfg.Host, cfg.QPS, cfg.CAData)
	}
	args, err := os.ReadFile(os.Getenv("FAKE_ARGS"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-v 2", "--data-dir " + o.apiserverDir, "--kubelet-host node-a=127.0.0.1",
		"--node-kubeconfig node-a=" + stale, "--admin-kubeconfig " + o.adminKubeconfig} {
		if !strings.Contains(string(args), want) {
			t.Errorf("child's arguments %q lack %q", args, want)
		}
	}
	child.stop(ctx)
	select {
	case <-child.done():
	default:
		t.Fatal("child still running after stop")
	}
	child.stop(ctx) // a second stop is harmless
}

func TestChildAPIServerFailingAtStart(t *testing.T) {
	o := fakeOptions(t, "fail")
	_, _, err := startChildAPIServer(context.Background(), o, "node-a")
	if !errors.Is(err, errAPIServerExited) || !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("err = %v, want the child's exit status", err)
	}
}

func TestChildAPIServerEndReported(t *testing.T) {
	o := fakeOptions(t, "serve")
	_, child, err := startChildAPIServer(context.Background(), o, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-child.done():
	case <-time.After(10 * time.Second):
		t.Fatal("the child's end was not reported")
	}
	if err := child.exitErr(); !errors.Is(err, errAPIServerExited) || !strings.Contains(err.Error(), "killed") {
		t.Errorf("exitErr = %v", err)
	}
}

func TestChildAPIServerMissingBinary(t *testing.T) {
	o := fakeOptions(t, "serve")
	o.apiserverBinary = filepath.Join(t.TempDir(), "nope")
	_, _, err := startChildAPIServer(context.Background(), o, "node-a")
	if err == nil || !strings.Contains(err.Error(), o.apiserverBinary) || !strings.Contains(err.Error(), "--apiserver-binary") {
		t.Fatalf("err = %v, want the path and how to set it", err)
	}
}

// A nil child (a node joining an API server with --kubeconfig) never reports an end and stops as a no-op.
func TestNoChildAPIServer(t *testing.T) {
	var c *childAPIServer
	c.stop(context.Background())
	select {
	case <-c.done():
		t.Fatal("a nil child reported an end")
	default:
	}
}

// A killed child is started again by its supervisor, on the port the first one served (the fake's kubeconfig
// names 7443; --apiserver-port 0 asked for any), and the node's health says so while it is down.
func TestChildAPIServerRestartedOnItsPort(t *testing.T) {
	o := fakeOptions(t, "serve")
	o.apiserverPort = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, child, err := startChildAPIServer(ctx, o, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	sup := superviseAPIServer(o, "node-a", cfg, child)
	ran := make(chan struct{})
	go func() { sup.Run(ctx); close(ran) }()
	if err := os.Remove(os.Getenv("FAKE_ARGS")); err != nil {
		t.Fatal(err)
	}
	if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-child.done()
	deadline := time.Now().Add(10 * time.Second)
	sawDown := false
	for sup.Restarts() == 0 {
		if err := sup.Check(); err != nil && strings.Contains(err.Error(), "being restarted") {
			sawDown = true
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed child was not started again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !sawDown {
		t.Error("health never said the API server was being restarted")
	}
	if err := sup.Check(); err != nil {
		t.Errorf("health after the restart: %v", err)
	}
	args, err := os.ReadFile(os.Getenv("FAKE_ARGS"))
	if err != nil || !strings.Contains(string(args), "--secure-port 7443") {
		t.Errorf("restarted with %q (%v), want --secure-port 7443", args, err)
	}
	cancel()
	<-ran
	sup.Stop(context.Background())
}
