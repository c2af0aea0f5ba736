//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	utilremotecommand "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	remotecommandserver "k8s.io/kubelet/pkg/cri/streaming/remotecommand"

	"github.com/nodeagent/kubelet/pkg/apiserver"
)

// kubectlPath is where hack/kube-binaries.sh puts kubectl; KUBECTL overrides it.
const kubectlPath = "/var/lib/nodeagent/bin/kubectl"

// kubectlEnv runs a real kubectl against an in-process lightweight apiserver.
type kubectlEnv struct {
	t          *testing.T
	bin        string
	kubeconfig string
	home       string
	srv        *apiserver.Server
}

func newKubectlEnv(t *testing.T) *kubectlEnv {
	t.Helper()
	bin := os.Getenv("KUBECTL")
	if bin == "" {
		bin = kubectlPath
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kubectl not found at %s (%v): build it with hack/kube-binaries.sh", bin, err)
	}
	dir := t.TempDir()
	srv, err := apiserver.New(apiserver.Config{DataDir: filepath.Join(dir, "data"), Port: 0})
	if err != nil {
		t.Fatalf("apiserver: %v", err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start apiserver: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	env := &kubectlEnv{t: t, bin: bin, kubeconfig: filepath.Join(dir, "admin.kubeconfig"), home: filepath.Join(dir, "home"), srv: srv}
	if err := srv.WriteAdminKubeconfig(env.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return env
}

func (e *kubectlEnv) cmd(ctx context.Context, stdin string, args ...string) *exec.Cmd {
	args = append([]string{"--kubeconfig", e.kubeconfig, "--cache-dir", filepath.Join(e.home, "cache")}, args...)
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = []string{"HOME=" + e.home, "PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}

// run runs kubectl and returns its combined output.
func (e *kubectlEnv) run(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := e.cmd(ctx, stdin, args...).CombinedOutput()
	return string(out), err
}

// ok runs kubectl, fails the test if it fails, and checks its output holds
// every string in want.
func (e *kubectlEnv) ok(stdin string, args []string, want ...string) string {
	e.t.Helper()
	out, err := e.run(stdin, args...)
	if err != nil {
		e.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			e.t.Fatalf("kubectl %s: output lacks %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	return out
}

// fails runs kubectl, which must fail with output holding every string in want.
func (e *kubectlEnv) fails(stdin string, args []string, want ...string) {
	e.t.Helper()
	out, err := e.run(stdin, args...)
	if err == nil {
		e.t.Fatalf("kubectl %s succeeded, want an error:\n%s", strings.Join(args, " "), out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			e.t.Fatalf("kubectl %s: error lacks %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
}

func podYAML(name, app string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    app: %s
spec:
  containers:
  - name: c
    image: localhost/busybox:1.35
    command: ["sleep", "3600"]
`, name, app)
}

func TestKubectl(t *testing.T) {
	k := newKubectlEnv(t)
	stdin := []string{"-f", "-"}
	k.ok("", []string{"version"}, "Client Version: v1.35", "Server Version: v1.35")
	k.ok("", []string{"get", "namespaces"}, "NAME", "STATUS", "default", "Active", "kube-system")

	// create and get: server-printed tables, JSONPath.
	k.ok(podYAML("web", "one"), append([]string{"create"}, stdin...), "pod/web created")
	k.ok("", []string{"get", "pods"}, "NAME", "READY", "STATUS", "web", "0/1", "Pending")
	k.ok("", []string{"get", "pod", "web", "-o", "wide"}, "IP", "NODE", "<none>")
	k.ok("", []string{"get", "pod", "web", "-o", "jsonpath={.spec.restartPolicy} {.metadata.labels.app}"}, "Always one")
	k.fails(podYAML("web", "one"), append([]string{"create"}, stdin...), "AlreadyExists")

	// Client-side apply: a label change, then the same again.
	k.ok(podYAML("app", "one"), append([]string{"apply"}, stdin...), "pod/app created")
	k.ok(podYAML("app", "two"), append([]string{"apply"}, stdin...), "pod/app configured")
	k.ok("", []string{"get", "pod", "app", "-o", "jsonpath={.metadata.labels.app}"}, "two")
	k.ok(podYAML("app", "two"), append([]string{"apply"}, stdin...), "pod/app unchanged")

	// Server-side apply, with a conflict between managers.
	k.ok(podYAML("ssa", "one"), append([]string{"apply", "--server-side"}, stdin...), "pod/ssa serverside-applied")
	k.fails(podYAML("ssa", "two"), append([]string{"apply", "--server-side", "--field-manager", "other"}, stdin...), "conflict")
	k.ok(podYAML("ssa", "two"), append([]string{"apply", "--server-side", "--field-manager", "other", "--force-conflicts"}, stdin...),
		"serverside-applied")

	// --dry-run=server stores nothing.
	k.ok(podYAML("dry", "one"), append([]string{"create", "--dry-run=server"}, stdin...), "pod/dry created (server dry run)")
	k.fails("", []string{"get", "pod", "dry"}, "NotFound")
	k.ok("", []string{"delete", "pod", "web", "--dry-run=server"}, "server dry run")
	k.ok("", []string{"get", "pod", "web"}, "web")

	// describe a pod and a node.
	k.ok("", []string{"describe", "pod", "app"}, "Name:", "app", "Labels:", "app=two", "Containers:", "localhost/busybox:1.35",
		"QoS Class:", "BestEffort")
	k.ok(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a","labels":{"kubernetes.io/os":"linux"}}}`,
		append([]string{"create"}, stdin...), "node/node-a created")
	k.ok("", []string{"get", "nodes"}, "node-a", "Unknown")
	k.ok("", []string{"describe", "node", "node-a"}, "Name:", "node-a", "kubernetes.io/os=linux")
	k.ok("", []string{"explain", "pod.spec.restartPolicy"}, "restartPolicy", "Restart policy")

	// get -w sees a pod appear.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var watchOut bytes.Buffer
	w := k.cmd(ctx, "", "get", "pods", "-w", "--output-watch-events")
	w.Stdout, w.Stderr = &watchOut, &watchOut
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	k.ok(podYAML("watched", "one"), append([]string{"create"}, stdin...), "created")
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(watchOut.String(), "watched") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	_ = w.Process.Kill()
	_ = w.Wait()
	if !strings.Contains(watchOut.String(), "ADDED") || !strings.Contains(watchOut.String(), "watched") {
		t.Errorf("get -w did not show the new pod:\n%s", watchOut.String())
	}

	// delete, then the pod is gone.
	k.ok("", []string{"delete", "pod", "web"}, `pod "web" deleted`)
	k.fails("", []string{"get", "pod", "web"}, "NotFound", `pods "web" not found`)

	// Bad input: a clear error and the store untouched.
	before := k.ok("", []string{"get", "pods", "-o", "name"})
	k.fails("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\n spec: [\n", append([]string{"create"}, stdin...), "yaml")
	k.fails(strings.Replace(podYAML("unknown", "x"), "command:", "bogusField: 1\n    command:", 1),
		append([]string{"create"}, stdin...), `unknown field "spec.containers[0].bogusField"`)
	k.fails(podYAML("Bad_Name", "x"), append([]string{"create"}, stdin...), "is invalid", "metadata.name")
	k.fails(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"noimage"},"spec":{"containers":[{"name":"c"}]}}`,
		append([]string{"create"}, stdin...), "is invalid", "spec.containers[0].image")
	if after := k.ok("", []string{"get", "pods", "-o", "name"}); after != before {
		t.Errorf("bad input changed the pods:\nbefore %s\nafter %s", before, after)
	}
}

// TestKubectlLogsExec drives kubectl logs and exec through the apiserver to a
// stand-in kubelet endpoint registered as the pod's node.
func TestKubectlLogsExec(t *testing.T) {
	k := newKubectlEnv(t)
	caPEM := k.srv.CACertPEM()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	seen := make(chan string, 16)
	upgrades := make(chan string, 16) // of the exec requests the kubelet gets
	kl := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Path + "?" + r.URL.RawQuery + " " + r.TLS.PeerCertificates[0].Subject.CommonName
		if parts := strings.Split(r.URL.Path, "/"); len(parts) == 5 && parts[1] == "exec" {
			upgrades <- r.Header.Get("Upgrade")
			opts, err := remotecommandserver.NewOptions(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			remotecommandserver.ServeExec(w, r, echoExec{}, parts[3], "", parts[4], r.URL.Query()["command"], opts,
				time.Minute, 10*time.Second, utilremotecommand.SupportedStreamingProtocols)
			return
		}
		_, _ = io.WriteString(w, "hello from the kubelet\n")
	}))
	kl.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	kl.StartTLS()
	defer kl.Close()
	_, port, _ := net.SplitHostPort(kl.Listener.Addr().String())

	k.ok(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-b"}}`, []string{"create", "-f", "-"}, "created")
	k.ok("", []string{"patch", "node", "node-b", "--subresource=status", "--type=merge", "-p",
		`{"status":{"addresses":[{"type":"Hostname","address":"127.0.0.1"}],"daemonEndpoints":{"kubeletEndpoint":{"Port":` + port + `}}}}`},
		"patched")
	pod := strings.Replace(podYAML("logs", "x"), "spec:\n", "spec:\n  nodeName: node-b\n", 1)
	k.ok(pod, []string{"create", "-f", "-"}, "created")
	k.ok("", []string{"logs", "logs", "--tail=3", "--timestamps"}, "hello from the kubelet")
	select {
	case got := <-seen:
		if got != "/containerLogs/default/logs/c?tailLines=3&timestamps=true "+apiserver.KubeletClientUser {
			t.Errorf("kubelet got %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the kubelet endpoint was not reached")
	}
	k.fails("", []string{"logs", "logs", "-c", "nope"}, "container nope is not valid")

	// kubectl exec: kubectl's WebSocket stream is translated to SPDY for the kubelet, as kube-apiserver does
	// (the kubelet's streaming server speaks SPDY): the kubelet sees one SPDY exec, no failed WebSocket first.
	k.ok("", []string{"exec", "logs", "--", "echo", "hi there"}, "c: echo|hi there")
	var got []string
	for len(upgrades) > 0 {
		got = append(got, <-upgrades)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "SPDY/") {
		t.Errorf("upgrades of the exec requests the kubelet got: %q, want one SPDY", got)
	}
	for len(seen) > 0 {
		if got := <-seen; strings.HasPrefix(got, "/exec/default/logs/c?command=echo&command=hi+there") {
			return
		}
	}
	t.Errorf("the kubelet endpoint saw no exec request")
}

// echoExec answers an exec with the container name and the command.
type echoExec struct{}

func (echoExec) ExecInContainer(_ context.Context, _ string, _ types.UID, container string, cmd []string,
	_ io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	_, err := fmt.Fprintf(out, "%s: %s\n", container, strings.Join(cmd, "|"))
	return err
}
