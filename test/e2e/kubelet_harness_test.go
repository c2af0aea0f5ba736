//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

var (
	buildOnce   sync.Once
	kubeletPath string
	buildErr    error
)

// kubeletBinary builds cmd/kubelet, and cmd/apiserver, cmd/noderuntime, cmd/nodecluster, cmd/nodeinit and cmd/containerlogd beside it, once per test run.
func kubeletBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nodeagent-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		// A standalone kubelet runs the API server from the binary beside its own.
		for _, c := range []string{"kubelet", "apiserver", "noderuntime", "nodecluster", "nodeinit", "containerlogd"} {
			cmd := exec.Command("go", "build", "-tags", "no_dynamic_plugins", "-o", filepath.Join(dir, c), "github.com/nodeagent/kubelet/cmd/"+c)
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", c, err, out)
				return
			}
		}
		kubeletPath = filepath.Join(dir, "kubelet")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return kubeletPath
}

// nodeRuntimeBinary is cmd/noderuntime, built with the kubelet.
func nodeRuntimeBinary(t *testing.T) string {
	return filepath.Join(filepath.Dir(kubeletBinary(t)), "noderuntime")
}

// node is a standalone kubelet (with its API server child) started as a user starts it.
type node struct {
	t      *testing.T
	name   string
	dir    string
	args   []string
	cmd    *exec.Cmd
	done   chan error
	client kubernetes.Interface
	log    *os.File
	cp     *controlPlane  // the real control plane it joins; nil for the standalone API server
	ext    *apiserverProc // the lightweight API server it joins, run on its own; nil for the standalone one
	remote bool           // the kubelet runs containerd's CRI plugin instead of the built-in runtime
	ns     string         // the built-in runtime's containerd namespace
	logs   string         // --pod-logs-dir
}

// in returns the node with t as the test its helpers fail, for subtests sharing one node.
func (n *node) in(t *testing.T) *node {
	c := *n
	c.t = t
	return &c
}

// criSocket is where the node's runtime answers CRI: the built-in runtime's socket, or containerd's.
func (n *node) criSocket() string {
	if n.remote {
		return containerdSock
	}
	return filepath.Join(n.dir, "cri.sock")
}

// runtimes are the two runtime backends a kubelet test runs on: the built-in runtime, and containerd's CRI
// plugin through --container-runtime-endpoint.
var runtimes = []struct {
	name string
	args []string
}{
	{"builtin", nil},
	{"cri-plugin", []string{"--container-runtime-endpoint", "unix://" + containerdSock}},
}

// forEachRuntime runs fn as a subtest per runtime backend, with a standalone node started on it.
func forEachRuntime(t *testing.T, fn func(t *testing.T, n *node), extraArgs ...string) {
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			n := startNode(t, append(append([]string(nil), rt.args...), extraArgs...)...)
			fn(t, n)
		})
	}
}

// startNode starts a standalone kubelet whose state lives in a fresh directory, and waits until its API
// answers. It is stopped (and its pods deleted) when the test ends. Under TestControlPlane, or with
// E2E_CONTROL_PLANE=real, the kubelet joins the real control plane of hack/control-plane.sh instead (see
// controlplane_test.go).
func startNode(t *testing.T, extraArgs ...string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{t: t, name: "e2e-node", dir: dir, ns: "nodeagent", logs: "/var/log/pods", remote: slices.Contains(extraArgs, "--container-runtime-endpoint")}
	if onRealControlPlane(t) {
		n.joinRealControlPlane(extraArgs)
		n.start()
		t.Cleanup(n.cleanup)
		return n
	}
	n.args = append([]string{
		"--hostname-override", n.name,
		"--root-dir", filepath.Join(dir, "root"),
		"--apiserver-data-dir", filepath.Join(dir, "apiserver"),
		"--apiserver-port", "0",
		"--admin-kubeconfig", filepath.Join(dir, "admin.kubeconfig"),
		"--cri-socket", filepath.Join(dir, "cri.sock"),
		"--pod-manifest-path", filepath.Join(dir, "manifests"),
		"-v", "2",
	}, append(n.isolate(t), extraArgs...)...)
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	n.start()
	t.Cleanup(n.cleanup)
	return n
}

// startNodeOn starts a kubelet, as startNode does, that joins the control plane cp.
func startNodeOn(t *testing.T, cp *controlPlane, extraArgs ...string) *node {
	t.Helper()
	n := &node{t: t, dir: t.TempDir(), ns: "nodeagent", logs: "/var/log/pods", remote: slices.Contains(extraArgs, "--container-runtime-endpoint")}
	n.joinControlPlane(cp, extraArgs)
	n.start()
	t.Cleanup(n.cleanup)
	return n
}

// kubeconfig is an administrator's kubeconfig for the node's API server, for pods on the host's network
// that talk to it (drivers and plugins).
func (n *node) kubeconfig() string {
	if n.cp != nil {
		return n.cp.kubeconfig
	}
	return filepath.Join(n.dir, "admin.kubeconfig")
}

// start launches the kubelet (with env added to its environment) and waits until its API answers.
func (n *node) start(env ...string) {
	t := n.t
	t.Helper()
	n.launch(env...)
	if n.cp != nil || n.ext != nil {
		n.waitRegistered()
		return
	}
	kc := filepath.Join(n.dir, "admin.kubeconfig")
	eventually(t, 60*time.Second, "kubelet writes its admin kubeconfig", func() error {
		select {
		case err := <-n.done:
			n.done <- err
			return fmt.Errorf("kubelet exited: %v; log:\n%s", err, n.logTail())
		default:
		}
		_, err := os.Stat(kc)
		return err
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	n.client = kubernetes.NewForConfigOrDie(cfg)
	eventually(t, 30*time.Second, "API answers", func() error {
		_, err := n.client.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
}

// launch starts the kubelet process with env added to its environment, and returns at once.
func (n *node) launch(env ...string) {
	t := n.t
	t.Helper()
	_ = os.Remove(filepath.Join(n.dir, "admin.kubeconfig"))
	log, err := os.OpenFile(filepath.Join(n.dir, "kubelet.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	n.log = log
	n.cmd = exec.Command(kubeletBinary(t), n.args...)
	n.cmd.Stdout, n.cmd.Stderr = log, log
	n.cmd.Env = append(os.Environ(), env...)
	exited, err := startChild(n.cmd)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	n.done = done
	go func() { done <- <-exited }()
}

// startNodeJoining starts a kubelet that joins api, the lightweight API server run on its own, as a node of
// a cluster does (--kubeconfig of its node identity), and waits until it has registered its Node.
func startNodeJoining(t *testing.T, api *apiserverProc, nodeKubeconfig string, extraArgs ...string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{t: t, name: "e2e-node", dir: dir, ext: api, client: api.client, ns: "nodeagent", logs: "/var/log/pods", remote: slices.Contains(extraArgs, "--container-runtime-endpoint")}
	isolation := n.isolateRuntime(t)
	n.args = append([]string{
		"--hostname-override", n.name,
		"--kubeconfig", nodeKubeconfig,
		// The API server's proxy (kubectl logs, exec) authenticates with a certificate of its CA.
		"--client-ca-file", filepath.Join(api.dataDir, "pki", "ca.crt"),
		"--root-dir", filepath.Join(dir, "root"),
		"--cri-socket", filepath.Join(dir, "cri.sock"),
		"--port", strconv.Itoa(freePort(t)),
		"--healthz-port", strconv.Itoa(freePort(t)),
		"-v", "2",
	}, append(isolation, extraArgs...)...)
	n.start()
	t.Cleanup(n.cleanup)
	return n
}

// kill sends SIGKILL and waits for the kubelet to exit; its containers keep running.
func (n *node) kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.done
	n.cmd = nil
	_ = n.log.Close()
}

// exited waits up to timeout for the kubelet to exit on its own, and reports whether it did.
func (n *node) exited(timeout time.Duration) bool {
	select {
	case <-n.done:
		n.cmd = nil
		_ = n.log.Close()
		return true
	case <-time.After(timeout):
		return false
	}
}

// stop sends SIGTERM and waits for the kubelet to exit; its containers keep running.
func (n *node) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	n.cmd = nil
	_ = n.log.Close()
}

// restartWith restarts the kubelet with more flags.
func (n *node) restartWith(args ...string) {
	n.args = append(n.args, args...)
	n.restart()
}

func (n *node) restart() {
	n.stop()
	n.start()
}

// cleanup deletes every pod through the API, waits for the kubelet to confirm, then stops it.
func (n *node) cleanup() {
	if n.cmd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		namespaces := map[string]bool{"default": true}
		if pods, err := n.client.CoreV1().Pods("").List(ctx, n.podsListOptions()); err == nil {
			for _, p := range pods.Items {
				namespaces[p.Namespace] = true
			}
		}
		for ns := range namespaces {
			_ = n.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		for ctx.Err() == nil {
			pods, err := n.client.CoreV1().Pods("").List(ctx, n.podsListOptions())
			if err == nil && len(pods.Items) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Every pod the kubelet ran, static pods included, is gone from the runtime before it stops: a stopped
		// kubelet leaves its containers running.
		if err := n.waitRuntimeEmpty(60*time.Second, nil); err != nil {
			n.t.Errorf("cleanup: %v", err)
		}
	}
	n.stop()
	// The kubelet made its root directory a shared mount (bind-mounted onto itself, this host's / being
	// private), as upstream's does; the test's directory goes only without it.
	unmountUnder(n.dir)
	if n.t.Failed() {
		n.t.Logf("kubelet log tail:\n%s", n.logTail())
	}
}

// waitRuntimeEmpty waits until the node's runtime (through its CRI socket) holds no sandbox and no container
// with the given labels (nil: none at all).
func (n *node) waitRuntimeEmpty(timeout time.Duration, labels map[string]string) error {
	rt, _, err := remote.Connect(n.criSocket(), 10*time.Second)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: labels})
		if err == nil {
			var ctrs []*runtimeapi.Container
			ctrs, err = rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: labels})
			if err == nil && len(sbs)+len(ctrs) > 0 {
				names := []string{}
				for _, sb := range sbs {
					names = append(names, sb.GetMetadata().GetNamespace()+"/"+sb.GetMetadata().GetName())
				}
				err = fmt.Errorf("%d sandboxes (pods %v) and %d containers left in the runtime", len(sbs), names, len(ctrs))
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *node) logTail() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "kubelet.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// createPod creates pod in the default namespace.
func (n *node) createPod(pod *v1.Pod) *v1.Pod {
	n.t.Helper()
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if n.cp != nil && !n.cp.scheduler && pod.Spec.NodeName == "" {
		pod.Spec.NodeName = n.name // no scheduler places pods on the shared real control plane
	}
	out, err := n.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return out
}

// waitPod waits until cond holds for the named pod and returns it.
func (n *node) waitPod(name string, timeout time.Duration, what string, cond func(*v1.Pod) error) *v1.Pod {
	n.t.Helper()
	var pod *v1.Pod
	eventually(n.t, timeout, what, func() error {
		p, err := n.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod = p
		return cond(p)
	})
	return pod
}

func busyboxPod(name string, cmd ...string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: ptrInt64(2),
			Containers:                    []v1.Container{{Name: "main", Image: busyboxImage, Command: cmd}},
		},
	}
}

func ptrInt64(v int64) *int64 { return &v }

// events returns the events of the named pod in the default namespace.
func (n *node) events(t *testing.T, pod string) []v1.Event {
	t.Helper()
	evs, err := n.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		t.Fatalf("events of %s: %v", pod, err)
	}
	return evs.Items
}

// deletePodAndWait deletes a pod and waits until the API no longer has it (the kubelet confirmed its end).
func (n *node) deletePodAndWait(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if err := n.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, name+" gone", func() error {
		if _, err := n.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("still there")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}
