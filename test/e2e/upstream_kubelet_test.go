//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/host"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// upstreamKubeletPath is where hack/kube-binaries.sh puts upstream's kubelet; UPSTREAM_KUBELET overrides it.
const upstreamKubeletPath = "/var/lib/nodeagent/bin/kubelet"

// upstreamNamespace is the containerd namespace of the runtime-only process upstream's kubelet runs on, and
// upstreamCgroupRoot its kubelet's cgroup root: neither is shared with another test's pods.
const (
	upstreamNamespace  = "nodeagent-upstream"
	upstreamCgroupRoot = "/nodeagent-upstream-e2e"
)

// Upstream's kubelet v1.35.4, joined to the real control plane, runs pods on the built-in runtime served by
// cmd/noderuntime, as it runs them on containerd's CRI plugin: pods become Ready, kubectl logs, exec and
// port-forward work, a crash loops and backs off, an OOM kill is reported, and deleted pods leave nothing in
// the runtime. A second noderuntime on the same namespace or socket refuses to start.
func TestUpstreamKubelet(t *testing.T) {
	bin := os.Getenv("UPSTREAM_KUBELET")
	if bin == "" {
		bin = upstreamKubeletPath
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("upstream kubelet not found at %s (%v): build it with hack/kube-binaries.sh kubelet", bin, err)
	}
	cp := realControlPlane(t)
	dir := t.TempDir()
	importBusybox(t, upstreamNamespace)
	makeCgroupRoot(t, upstreamCgroupRoot)

	sock := filepath.Join(dir, "runtime.sock")
	rtProc, rt, images := startNodeRuntime(t, dir, sock, upstreamNamespace)

	t.Run("refused starts", func(t *testing.T) {
		out, err := exec.Command(nodeRuntimeBinary(t), "--cri-socket", filepath.Join(dir, "other.sock"),
			"--containerd-namespace", upstreamNamespace, "--root-dir", filepath.Join(dir, "other-root")).CombinedOutput()
		if err == nil || !strings.Contains(string(out), `already serves containerd namespace "`+upstreamNamespace+`"`) {
			t.Errorf("a second noderuntime on the namespace: err %v, output %q", err, out)
		}
		out, err = exec.Command(nodeRuntimeBinary(t), "--cri-socket", sock, "--containerd-namespace", upstreamNamespace+"-other",
			"--root-dir", filepath.Join(dir, "other-root")).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "another server is listening") {
			t.Errorf("a second noderuntime on the socket: err %v, output %q", err, out)
		}
		if _, err := rt.Version(context.Background(), "v1"); err != nil {
			t.Errorf("the first noderuntime stopped answering: %v", err)
		}
		// containerd unreachable: a clear error, and the namespace's lock is given back.
		ns := upstreamNamespace + "-nocontainerd"
		out, err = exec.Command(nodeRuntimeBinary(t), "--cri-socket", filepath.Join(dir, "nocontainerd.sock"),
			"--containerd-namespace", ns, "--containerd-address", filepath.Join(dir, "no-such.sock"),
			"--root-dir", filepath.Join(dir, "other-root")).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "is containerd running") {
			t.Errorf("noderuntime without containerd: err %v, output %q", err, out)
		}
		if l, err := host.LockNamespace("/run/nodeagent", ns); err != nil {
			t.Errorf("the lock of a noderuntime that failed to start is still held: %v", err)
		} else {
			l.Release()
		}
	})

	n := &node{t: t, name: cp.node, dir: dir, cp: cp, client: cp.client}
	n.forgetNode()
	removeHostsLine := addHostsLine(t, n.name)
	t.Cleanup(func() {
		n.forgetNode()
		removeHostsLine()
	})
	// Pods left when the test fails are removed through the runtime once the kubelet is gone, and those an
	// interrupted earlier run left in the namespace before the kubelet starts.
	removeAllPods(t, rt)
	t.Cleanup(func() { removeAllPods(t, rt) })
	config := filepath.Join(dir, "kubelet.yaml")
	port, healthz := freePort(t), freePort(t)
	writeFile(t, config, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
failSwapOn: false
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: 1Mi}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
`, port, healthz, cp.ca, sock, upstreamCgroupRoot))
	kubelet := startProcess(t, filepath.Join(dir, "kubelet.log"), bin,
		"--config", config, "--kubeconfig", cp.nodeKubeconfig, "--hostname-override", n.name,
		"--root-dir", filepath.Join(dir, "kubelet"), "--cert-dir", filepath.Join(dir, "pki"), "-v", "2")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("upstream kubelet log tail:\n%s\nnoderuntime log tail:\n%s", kubelet.tail(), rtProc.tail())
		}
	})
	eventually(t, 90*time.Second, "upstream kubelet's Node Ready on noderuntime", func() error {
		if kubelet.exited() {
			return fmt.Errorf("kubelet exited:\n%s", kubelet.tail())
		}
		node, err := cp.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(v, runtime.Name+"://") {
			return fmt.Errorf("runtime version %q, want %s://", v, runtime.Name)
		}
		return nodeReady(node)
	})

	web := busyboxPod("web", "sh", "-c", "echo started-web; mkdir -p /www && echo served-by-pod > /www/index.html && exec httpd -f -p 8080 -h /www")
	crash := busyboxPod("crash", "sh", "-c", "echo crashing; exit 3")
	oom := busyboxPod("oom", "sh", "-c", "dd if=/dev/zero of=/dev/null bs=256M count=1")
	oom.Spec.RestartPolicy = v1.RestartPolicyNever
	oom.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}
	for _, p := range []*v1.Pod{web, crash, oom} {
		p.Spec.AutomountServiceAccountToken = new(bool)
		n.createPod(p)
	}

	t.Run("ready, logs, exec, port-forward", func(t *testing.T) {
		n := n.in(t)
		n.waitPod("web", 90*time.Second, "web Ready", func(p *v1.Pod) error {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("phase %s, not Ready", p.Status.Phase)
		})
		k := &kubectlEnv{t: t, bin: kubectlPath, kubeconfig: cp.kubeconfig, home: t.TempDir()}
		k.ok("", []string{"logs", "web"}, "started-web")
		k.ok("", []string{"exec", "web", "--", "cat", "/www/index.html"}, "served-by-pod")
		local := freePort(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pf := k.cmd(ctx, "", "port-forward", "pod/web", strconv.Itoa(local)+":8080")
		var pfOut syncBuffer
		pf.Stdout, pf.Stderr = &pfOut, &pfOut
		if err := pf.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = pf.Wait() }()
		eventually(t, 30*time.Second, "the page through port-forward", func() error {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", local))
			if err != nil {
				return fmt.Errorf("%v (kubectl: %s)", err, pfOut.String())
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if string(b) != "served-by-pod\n" {
				return fmt.Errorf("%d %q", resp.StatusCode, b)
			}
			return nil
		})
	})

	t.Run("crash loop backs off", func(t *testing.T) {
		n.in(t).waitPod("crash", 120*time.Second, "crash restarted and backing off", func(p *v1.Pod) error {
			if len(p.Status.ContainerStatuses) == 0 {
				return fmt.Errorf("no container status")
			}
			cs := p.Status.ContainerStatuses[0]
			if cs.RestartCount < 2 || cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
				return fmt.Errorf("restarts %d, state %+v", cs.RestartCount, cs.State)
			}
			if term := cs.LastTerminationState.Terminated; term == nil || term.ExitCode != 3 {
				return fmt.Errorf("last termination %+v, want exit 3", cs.LastTerminationState)
			}
			return nil
		})
	})

	t.Run("OOMKilled", func(t *testing.T) {
		p := n.in(t).waitPod("oom", 90*time.Second, "oom terminated", func(p *v1.Pod) error {
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
				return fmt.Errorf("not terminated yet")
			}
			return nil
		})
		if term := p.Status.ContainerStatuses[0].State.Terminated; term.Reason != "OOMKilled" || term.ExitCode != 137 {
			t.Errorf("terminated %q exit %d, want OOMKilled 137", term.Reason, term.ExitCode)
		}
	})

	t.Run("deleted pods leave nothing", func(t *testing.T) {
		for _, name := range []string{"web", "crash", "oom"} {
			if err := cp.client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"web", "crash", "oom"} {
			n.in(t).waitGone(name, 90*time.Second)
		}
		// The kubelet stops the pods at once and its garbage collection (every minute) removes them.
		eventually(t, 150*time.Second, "no sandbox or container left in the runtime", func() error {
			return runtimeEmpty(rt)
		})
		imgs, err := images.ListImages(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range imgs {
			if strings.Contains(strings.Join(img.RepoTags, ","), "pause") && !img.Pinned {
				t.Errorf("the pause image is not pinned: %+v", img)
			}
		}
	})
	if kubelet.exited() {
		t.Errorf("upstream kubelet exited:\n%s", kubelet.tail())
	}
}

// runtimeEmpty says what sandboxes and containers rt still holds.
func runtimeEmpty(rt interface {
	ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sbs, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	ctrs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		return err
	}
	if len(sbs)+len(ctrs) == 0 {
		return nil
	}
	var names []string
	for _, sb := range sbs {
		names = append(names, fmt.Sprintf("%s/%s (%s)", sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName(), sb.GetState()))
	}
	sort.Strings(names)
	return fmt.Errorf("%d sandboxes %v and %d containers left", len(sbs), names, len(ctrs))
}

// removeAllPods stops and removes every sandbox rt holds.
func removeAllPods(t *testing.T, rt interface {
	ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	StopPodSandbox(context.Context, string) error
	RemovePodSandbox(context.Context, string) error
}) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Logf("list sandboxes left: %v", err)
		return
	}
	for _, sb := range sbs {
		_ = rt.StopPodSandbox(ctx, sb.Id)
		if err := rt.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Logf("remove sandbox %s left: %v", sb.Id, err)
		}
	}
}

// waitGone waits until the API no longer has the named pod.
func (n *node) waitGone(name string, timeout time.Duration) {
	n.t.Helper()
	eventually(n.t, timeout, name+" gone", func() error {
		_, err := n.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		if !strings.Contains(err.Error(), "not found") {
			return err
		}
		return nil
	})
}

// importBusybox imports the busybox archive `make setup` built into a containerd namespace.
func importBusybox(t *testing.T, namespace string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := builtinConfig(t.TempDir(), cniConfDir)
	cfg.Namespace = namespace
	rt, err := runtime.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	f, err := os.Open("/var/lib/nodeagent/images/busybox.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := rt.ImportImage(ctx, f); err != nil {
		t.Fatalf("import busybox into %s: %v", namespace, err)
	}
}

// makeCgroupRoot creates a cgroup in every v1 hierarchy (upstream's kubelet requires its cgroup root to
// exist) and removes it, with what the kubelet made below it, when the test ends.
func makeCgroupRoot(t *testing.T, name string) {
	t.Helper()
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	var made []string
	for _, h := range hierarchies {
		if fi, err := os.Lstat(h); err != nil || !fi.IsDir() {
			continue // the cpu,cpuacct style symlinks
		}
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue
		}
		p := filepath.Join(h, name)
		if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
			t.Fatalf("cgroup root: %v", err)
		}
		made = append(made, p)
	}
	t.Cleanup(func() {
		for _, p := range made {
			if err := removeCgroupTree(p); err != nil {
				t.Log(err)
			}
		}
	})
}

// removeCgroupTree removes an empty cgroup and its empty children, deepest first.
func removeCgroupTree(p string) error {
	var dirs []string
	_ = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && err != syscall.ENOENT {
			return fmt.Errorf("remove cgroup %s: %w", dirs[i], err)
		}
	}
	return nil
}

// process is a child process of a test, logging to a file; it is stopped (SIGTERM, then SIGKILL) when the
// test ends.
type process struct {
	cmd  *exec.Cmd
	log  string
	done <-chan error
	err  error
	gone bool
}

// startNodeRuntime starts cmd/noderuntime serving containerd namespace ns on sock, its state and log under
// dir, and returns it with CRI clients of it once it answers (closed when the test ends).
func startNodeRuntime(t *testing.T, dir, sock, ns string, extraArgs ...string) (*process, cri.RuntimeService, cri.ImageManagerService) {
	t.Helper()
	args := append([]string{"--cri-socket", sock, "--containerd-namespace", ns,
		"--root-dir", filepath.Join(dir, "runtime-root"), "-v", "2"}, extraArgs...)
	proc := startProcess(t, filepath.Join(dir, "noderuntime.log"), nodeRuntimeBinary(t), args...)
	var rt cri.RuntimeService
	var images cri.ImageManagerService
	eventually(t, 30*time.Second, "noderuntime answers CRI", func() error {
		if proc.exited() {
			return fmt.Errorf("noderuntime exited:\n%s", proc.tail())
		}
		var err error
		rt, images, err = remote.Connect(sock, 5*time.Second)
		return err
	})
	t.Cleanup(func() { rt.Close(); images.Close() })
	return proc, rt, images
}

func startProcess(t *testing.T, log, bin string, args ...string) *process {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: exec.Command(bin, args...), log: log}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if p.done, err = startChild(p.cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case p.err = <-p.done:
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
				p.err = <-p.done
			}
		}
		f.Close()
		unmountUnder(filepath.Dir(log))
	})
	return p
}

// exited says whether the process has ended.
func (p *process) exited() bool {
	if p.gone {
		return true
	}
	select {
	case p.err = <-p.done:
		p.gone = true
	default:
	}
	return p.gone
}

// tail is the end of the process's log.
func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// unmountUnder lazily unmounts what is mounted below dir (a kubelet's volumes), deepest first, so that the
// test's directory can be removed.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			mounts = append(mounts, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
