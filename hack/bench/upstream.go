package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

const (
	upstreamNamespace  = "nodeagent-bench-upstream" // noderuntime's containerd namespace
	upstreamCgroupRoot = "/nodeagent-bench-upstream"
	criPluginSocket    = containerdSock // containerd's CRI plugin, namespace k8s.io
)

// benchUpstream runs upstream's kubelet v1.35.4 (hack/kube-binaries.sh kubelet) joined to the real control
// plane (hack/control-plane.sh) on two runtimes in turn: the built-in runtime served by cmd/noderuntime, and
// containerd's CRI plugin. Each round creates the same 30 pods at once on each, in alternating order, and
// measures create-to-Ready from the benchmark's watch. The CRI plugin's figures are the floor; the ratios
// (noderuntime / CRI plugin) are printed from the medians over the rounds.
func benchUpstream(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	rounds := fs.Int("rounds", 2, "rounds of one burst on each runtime")
	kubeletBin := fs.String("kubelet", "/var/lib/nodeagent/bin/kubelet", "upstream's kubelet (hack/kube-binaries.sh kubelet)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(*kubeletBin); err != nil {
		return fmt.Errorf("upstream kubelet: %w (build it with hack/kube-binaries.sh kubelet)", err)
	}
	env, client, dir, undo, err := upstreamSetup(ctx, "nodeagent-bench-upstream")
	defer undo()
	if err != nil {
		return err
	}
	node := env["CONTROL_PLANE_NODE"]

	// noderuntime, with busybox imported into its namespace.
	prep, err := openRuntime(ctx, upstreamNamespace, filepath.Join(dir, "prep"))
	if err != nil {
		return err
	}
	prep.Close()
	// noderuntime runs the container log daemon beside its binary.
	for _, cmd := range []string{"noderuntime", "containerlogd"} {
		build := exec.CommandContext(ctx, "go", "build", "-tags", "no_dynamic_plugins", "-o", filepath.Join(dir, cmd), "./cmd/"+cmd)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build ./cmd/%s (run from the repository root): %w", cmd, err)
		}
	}
	sock := filepath.Join(dir, "runtime.sock")
	rtProc := &kubeletChild{logPath: filepath.Join(dir, "noderuntime.log")}
	if err := rtProc.spawn(filepath.Join(dir, "noderuntime"), []string{"--cri-socket", sock,
		"--containerd-namespace", upstreamNamespace, "--root-dir", filepath.Join(dir, "runtime-root")}); err != nil {
		return err
	}
	defer rtProc.stop()
	// Upstream's kubelet gives up at once on a runtime socket that is not there yet (on a fresh host the first
	// run failed with "dial unix .../runtime.sock: connect: no such file or directory"): wait for noderuntime
	// to answer first.
	if err := waitFor(ctx, time.Minute, "noderuntime answering on "+sock, func() bool {
		if _, err := os.Stat(sock); err != nil {
			return false
		}
		rs, _, err := remote.Connect(sock, 2*time.Second)
		if err != nil {
			return false
		}
		_, err = rs.Version(ctx, "")
		return err == nil
	}); err != nil {
		return err
	}

	watch := newPodWatch(client, "default")
	if err := watch.start(ctx); err != nil {
		return err
	}
	runtimes := []struct{ name, endpoint string }{{"noderuntime", sock}, {"cri_plugin", criPluginSocket}}
	p50s, p99s := map[string][]float64{}, map[string][]float64{}
	for round := 1; round <= *rounds; round++ {
		order := []int{0, 1}
		if round%2 == 0 {
			order = []int{1, 0}
		}
		for _, i := range order {
			rt := runtimes[i]
			progress("upstream kubelet on %s: 30 pods at once (round %d)", rt.name, round)
			p50, p99, err := upstreamBurst(ctx, client, watch, *kubeletBin, env, node, filepath.Join(dir, fmt.Sprintf("%s-%d", rt.name, round)),
				rt.endpoint, fmt.Sprintf("up%s%d", strings.ReplaceAll(rt.name, "_", ""), round))
			if err != nil {
				return fmt.Errorf("upstream kubelet on %s: %w", rt.name, err)
			}
			p50s[rt.name], p99s[rt.name] = append(p50s[rt.name], p50), append(p99s[rt.name], p99)
		}
	}
	for _, rt := range runtimes {
		figure("upstream_kubelet_"+rt.name+"_burst30_create_to_ready_p50_median", median(p50s[rt.name]), "ms")
		figure("upstream_kubelet_"+rt.name+"_burst30_create_to_ready_p99_median", median(p99s[rt.name]), "ms")
	}
	figure("upstream_kubelet_noderuntime_over_cri_plugin_p50_ratio", 100*median(p50s["noderuntime"])/median(p50s["cri_plugin"]), "%")
	figure("upstream_kubelet_noderuntime_over_cri_plugin_p99_ratio", 100*median(p99s["noderuntime"])/median(p99s["cri_plugin"]), "%")
	return nil
}

// upstreamSetup starts the real control plane (controlPlaneEnv), connects to it, and makes a work directory
// and upstream's kubelet's cgroup root; undo (always to be called) removes both.
func upstreamSetup(ctx context.Context, dirPrefix string) (env map[string]string, client kubernetes.Interface, dir string, undo func(), err error) {
	var undos []func()
	undo = func() {
		for i := len(undos) - 1; i >= 0; i-- {
			undos[i]()
		}
	}
	if env, err = controlPlaneEnv(ctx); err != nil {
		return
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env["CONTROL_PLANE_KUBECONFIG"])
	if err != nil {
		return
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		return
	}
	if dir, err = os.MkdirTemp("", dirPrefix); err != nil {
		return
	}
	undos = append(undos, func() { _ = os.RemoveAll(dir) })
	undoCgroup, err := makeCgroupRoot(upstreamCgroupRoot)
	undos = append(undos, undoCgroup)
	return
}

// upstreamBurst starts upstream's kubelet on the CRI endpoint, waits for its Node to be Ready, creates 30
// pods at once, returns their create-to-Ready p50 and p99 in ms, deletes them, removes what is left of them in
// the runtime and stops the kubelet.
func upstreamBurst(ctx context.Context, client kubernetes.Interface, watch *podWatch, bin string, env map[string]string,
	node, dir, endpoint, prefix string) (float64, float64, error) {
	kl, stop, err := startUpstreamKubelet(ctx, client, bin, env, node, dir, endpoint, 110)
	defer stop(prefix)
	if err != nil {
		return 0, 0, err
	}
	pods := names(prefix, 30)
	errs := make(chan error, len(pods))
	for _, name := range pods {
		pod := benchPodSpec(name, node, prefix, corev1.RestartPolicyAlways, "sleep", "3600")
		f := false
		pod.Spec.AutomountServiceAccountToken = &f
		go func() {
			t0 := time.Now()
			watch.mark(pod.Name, func(t *podTimes) { t.created = t0 })
			_, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			errs <- err
		}()
	}
	var createErrs []error
	for range pods {
		createErrs = append(createErrs, <-errs)
	}
	if err := errors.Join(createErrs...); err != nil {
		return 0, 0, err
	}
	if err := watch.waitAll(ctx, pods, "Ready", 3*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
		return 0, 0, fmt.Errorf("%w; kubelet log tail:\n%s", err, kl.logTail(3000))
	}
	var lat []time.Duration
	for _, t := range watch.times(pods) {
		lat = append(lat, t.ready.Sub(t.created))
	}
	grace := int64(0)
	for _, name := range pods {
		_ = client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}
	if err := watch.waitAll(ctx, pods, "gone", 3*time.Minute, func(t *podTimes) bool { return !t.gone.IsZero() }); err != nil {
		return 0, 0, err
	}
	return ms(percentile(lat, 50)), ms(percentile(lat, 99)), nil
}

// startUpstreamKubelet starts upstream's kubelet with its state in dir, on the CRI endpoint, admitting up to
// maxPods pods, and waits for its Node to be Ready. stop (always to be called, with the prefix of the pods'
// names) stops it, removes the sandboxes of those pods it left in the runtime and unmounts what it mounted.
func startUpstreamKubelet(ctx context.Context, client kubernetes.Interface, bin string, env map[string]string,
	node, dir, endpoint string, maxPods int) (*kubeletChild, func(prefix string), error) {
	kl := &kubeletChild{logPath: filepath.Join(dir, "kubelet.log")}
	stop := func(prefix string) {
		kl.stop()
		removePods(endpoint, prefix)
		unmountBelow(dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return kl, stop, err
	}
	port, err := freePort()
	if err != nil {
		return kl, stop, err
	}
	config := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(upstreamKubeletConfig, port, env["CONTROL_PLANE_CA"], endpoint, upstreamCgroupRoot, maxPods)), 0o644); err != nil {
		return kl, stop, err
	}
	_ = client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	if err := kl.spawn(bin, []string{"--config", config, "--kubeconfig", env["CONTROL_PLANE_NODE_KUBECONFIG"],
		"--hostname-override", node, "--root-dir", filepath.Join(dir, "root"), "--cert-dir", filepath.Join(dir, "pki")}); err != nil {
		return kl, stop, err
	}
	return kl, stop, kl.waitNodeReady(ctx, client, node, 2*time.Minute)
}

// upstreamKubeletConfig: port, client CA, CRI endpoint, cgroup root, maximum pods. No eviction or image GC in the way.
const upstreamKubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
healthzPort: 0
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
evictionHard: {memory.available: 1Mi}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: %d
`

// controlPlaneEnv starts the real control plane (idempotent) and returns what it printed.
func controlPlaneEnv(ctx context.Context) (map[string]string, error) {
	if out, err := exec.CommandContext(ctx, "hack/kube-binaries.sh", "kube-apiserver").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("hack/kube-binaries.sh kube-apiserver: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, "hack/control-plane.sh", "start")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("hack/control-plane.sh start: %w", err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			env[k] = v
		}
	}
	for _, k := range []string{"CONTROL_PLANE_KUBECONFIG", "CONTROL_PLANE_NODE_KUBECONFIG", "CONTROL_PLANE_CA", "CONTROL_PLANE_NODE"} {
		if env[k] == "" {
			return nil, fmt.Errorf("hack/control-plane.sh start printed no %s", k)
		}
	}
	return env, nil
}

// removePods stops and removes the sandboxes of pods named prefix* that the kubelet left in the runtime.
func removePods(endpoint, prefix string) {
	rt, _, err := remote.Connect(endpoint, 10*time.Second)
	if err != nil {
		return
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return
	}
	for _, sb := range sbs {
		if !strings.HasPrefix(sb.GetMetadata().GetName(), prefix) {
			continue
		}
		_ = rt.StopPodSandbox(ctx, sb.Id)
		_ = rt.RemovePodSandbox(ctx, sb.Id)
	}
}

// makeCgroupRoot creates name in every cgroup v1 hierarchy (upstream's kubelet wants its cgroup root to
// exist); undo removes it and the empty cgroups below it.
func makeCgroupRoot(name string) (func(), error) {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	var made []string
	undo := func() {
		for _, p := range made {
			var dirs []string
			_ = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				_ = syscall.Rmdir(dirs[i])
			}
		}
	}
	for _, h := range hierarchies {
		if fi, err := os.Lstat(h); err != nil || !fi.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue
		}
		p := filepath.Join(h, name)
		if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
			return undo, fmt.Errorf("cgroup root: %w", err)
		}
		made = append(made, p)
	}
	return undo, nil
}

// unmountBelow lazily unmounts what a kubelet mounted below dir.
func unmountBelow(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}
