package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// denseRun is one run of the dense benchmark: a node filled to --max-pods at 10 pods a second, ours then
// upstream's kubelet on containerd's CRI plugin, against the same floor.
type denseRun struct {
	pods     int
	interval time.Duration // between two creates
	// floor is the runtime floor's run-sandbox-to-started times for the same pods at the same pace.
	floor []time.Duration
	// ours and upstream are the node's memory (PSS in KiB by part) empty, then full.
	ours, upstream [2]map[string]int64
}

// benchDense fills a node to --pods pods (250 by default, the kubelet started with --max-pods at that) at 10
// pods a second: create-to-Ready beside the runtime floor, the kubelet's idle CPU and a relist's cost with
// the node full, each part's memory empty and full, and deleting them all; then the same for upstream's
// kubelet v1.35.4 on containerd's CRI plugin, joined to the real control plane, in the same run. It prints the
// whole node's memory per pod of each, and their ratio. The pods carry no service-account token on either
// side (upstream's control plane here runs no token controller).
func benchDense(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dense", flag.ContinueOnError)
	pods := fs.Int("pods", 250, "pods on the node (its --max-pods)")
	idle := fs.Duration("idle", 30*time.Second, "length of the idle window with the node full")
	withUpstream := fs.Bool("upstream", true, "also fill upstream's kubelet on containerd's CRI plugin (needs hack/kube-binaries.sh kubelet kube-apiserver)")
	kubeletBin := fs.String("kubelet", "/var/lib/nodeagent/bin/kubelet", "upstream's kubelet (hack/kube-binaries.sh kubelet)")
	rate := fs.Float64("rate", 10, "pods created per second")
	pprofDir := fs.String("pprof", "", "save Go CPU profiles of our kubelet while it fills, and its heap profile when full, into this directory (bench kubelet's --pprof)")
	pprofFor := fs.Duration("pprof-for", 30*time.Second, "length of the --pprof CPU profile")
	saveLog := fs.String("save-log", "", "copy our kubelet's log to this file at the end")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pods < 1 || *rate <= 0 {
		return errors.New("--pods must be at least 1 and --rate above 0")
	}
	if *withUpstream {
		if _, err := os.Stat(*kubeletBin); err != nil {
			return fmt.Errorf("upstream kubelet: %w (build it with hack/kube-binaries.sh kubelet, or pass --upstream=false)", err)
		}
	}
	d := &denseRun{pods: *pods, interval: time.Duration(float64(time.Second) / *rate)}
	if err := runKubeletBench(ctx, []string{"--only", "dense", "--idle", idle.String(), "--pprof", *pprofDir,
		"--pprof-for", pprofFor.String(), "--save-log", *saveLog, "--kubelet-flags", fmt.Sprintf("--max-pods %d", *pods)}, d); err != nil {
		return err
	}
	if !*withUpstream {
		return nil
	}
	if err := upstreamDense(ctx, d, *kubeletBin, *idle); err != nil {
		return fmt.Errorf("upstream kubelet: %w", err)
	}
	ours, up := perPodKiB(d.ours, d.pods), perPodKiB(d.upstream, d.pods)
	if up > 0 {
		figure(fmt.Sprintf("dense%d_node_pss_per_pod_ours_over_upstream", d.pods), 100*ours/up, "%")
	}
	return nil
}

// runDense is the kubelet bench's dense phase: our kubelet (started with --max-pods d.pods) filled at 10 pods
// a second beside the floor.
func (b *kubeletBench) runDense(ctx context.Context, floorRT *runtime.Runtime, logd string) error {
	d := b.dense
	n := d.pods
	b.mutate = withoutToken
	parts := func() map[string][]int {
		return map[string][]int{
			"kubelet":       {b.kl.pid()},
			"apiserver":     nonZero(b.apiPID()),
			"containerlogd": findProcs(func(c string) bool { bin, _, _ := strings.Cut(c, " "); return bin == logd }),
			"containerd":    containerdPIDs(),
			"shims":         shimPIDs(kubeletNamespace),
		}
	}
	if err := sleepCtx(ctx, 5*time.Second); err != nil {
		return err
	}
	d.ours[0] = nodePSS(parts())

	progress("floor: %d pods, one every %v", n, d.interval)
	stopCPU := runtimeCPU(floorNamespace)
	fd, _, fwall, err := floorRun(ctx, floorRT, b.floorLogs, n, d.interval)
	if err != nil {
		return fmt.Errorf("floor paced: %w", err)
	}
	printRuntimeCPU(fmt.Sprintf("floor_paced%d", n), stopCPU)
	printLatencies(fmt.Sprintf("floor_paced%d_pod", n), fd)
	figure(fmt.Sprintf("floor_paced%d_pods_per_second", n), float64(n)/fwall.Seconds(), "pods/s")
	d.floor = fd
	if _, err := removeAllSandboxes(ctx, floorRT, 8); err != nil {
		return fmt.Errorf("floor paced cleanup: %w", err)
	}

	progress("kubelet: %d pods, one every %v", n, d.interval)
	pods := names("dense", n)
	if _, err := b.createReady(ctx, fmt.Sprintf("kubelet_paced%d", n), pods, d.interval, fd); err != nil {
		return err
	}
	label := fmt.Sprintf("%dpods", n)
	if err := b.idleWindow(ctx, label); err != nil {
		return err
	}
	b.relist(ctx, label)
	d.ours[1] = nodePSS(parts())
	printNodeMemory("kubelet", d.ours, n)
	progress("kubelet: deleting %d pods, grace 2 s", n)
	_, err = b.deleteGone(ctx, fmt.Sprintf("kubelet_delete%d", n), pods)
	return err
}

// upstreamDense fills upstream's kubelet on containerd's CRI plugin as runDense fills ours, against the floor
// runDense measured.
func upstreamDense(ctx context.Context, d *denseRun, kubeletBin string, idle time.Duration) error {
	env, client, dir, undo, err := upstreamSetup(ctx, "nodeagent-bench-dense")
	defer undo()
	if err != nil {
		return err
	}
	node := env["CONTROL_PLANE_NODE"]
	const prefix = "updense"
	progress("upstream kubelet on the CRI plugin, --max-pods %d", d.pods)
	kl, stop, err := startUpstreamKubelet(ctx, client, kubeletBin, env, node, dir, criPluginSocket, d.pods)
	defer stop(prefix)
	if err != nil {
		return fmt.Errorf("%w; kubelet log tail:\n%s", err, kl.logTail(3000))
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := newPodWatch(client, "default")
	if err := watch.start(wctx); err != nil {
		return err
	}
	cri, _, err := remote.Connect(criPluginSocket, time.Minute)
	if err != nil {
		return err
	}
	runDir := filepath.Join(env["CONTROL_PLANE_DIR"], "run")
	b := &kubeletBench{kl: kl, client: client, cri: cri, watch: watch, idleFor: idle, node: node, namespace: "k8s.io",
		apiProc: pidFile(filepath.Join(runDir, "kube-apiserver.pid")), mutate: withoutToken}
	parts := func() map[string][]int {
		return map[string][]int{"kubelet": {kl.pid()}, "containerd": containerdPIDs(), "shims": shimPIDs("k8s.io")}
	}
	controlPlane := func() map[string][]int {
		return map[string][]int{
			"kube_apiserver": nonZero(b.apiProc),
			"etcd":           nonZero(pidFile(filepath.Join(runDir, "etcd.pid"))),
		}
	}
	if err := sleepCtx(ctx, 5*time.Second); err != nil {
		return err
	}
	d.upstream[0] = nodePSS(parts())
	cp0 := nodePSS(controlPlane())

	progress("upstream kubelet: %d pods, one every %v", d.pods, d.interval)
	pods := names(prefix, d.pods)
	if _, err := b.createReady(ctx, fmt.Sprintf("upstream_kubelet_paced%d", d.pods), pods, d.interval, d.floor); err != nil {
		return err
	}
	label := fmt.Sprintf("upstream_%dpods", d.pods)
	if err := b.idleWindow(ctx, label); err != nil {
		return err
	}
	b.relist(ctx, label)
	d.upstream[1] = nodePSS(parts())
	printNodeMemory("upstream", d.upstream, d.pods)
	// The control plane is not on upstream's node; what it holds per pod is printed apart.
	printNodeMemory("upstream_control_plane", [2]map[string]int64{cp0, nodePSS(controlPlane())}, d.pods)
	progress("upstream kubelet: deleting %d pods, grace 2 s", d.pods)
	_, err = b.deleteGone(ctx, fmt.Sprintf("upstream_kubelet_delete%d", d.pods), pods)
	return err
}

// withoutToken leaves the service-account token out of a pod.
func withoutToken(p *corev1.Pod) {
	f := false
	p.Spec.AutomountServiceAccountToken = &f
}

// nodePSS sums the proportional memory (PSS, KiB) of each part's processes.
func nodePSS(parts map[string][]int) map[string]int64 {
	out := make(map[string]int64, len(parts))
	for name, pids := range parts {
		out[name] = readGroup(pids).pssKiB
	}
	return out
}

// perPodKiB is what the node's parts together hold per pod: the growth from empty to full over the pods.
func perPodKiB(m [2]map[string]int64, pods int) float64 {
	var empty, full int64
	for _, v := range m[0] {
		empty += v
	}
	for _, v := range m[1] {
		full += v
	}
	return float64(full-empty) / float64(pods)
}

// printNodeMemory prints each part's PSS empty and full, the total, and the growth per pod.
func printNodeMemory(prefix string, m [2]map[string]int64, pods int) {
	names := make([]string, 0, len(m[1]))
	for name := range m[1] {
		names = append(names, name)
	}
	sort.Strings(names)
	var total int64
	for _, name := range names {
		figure(fmt.Sprintf("%s_%s_pss_0pods", prefix, name), mib(m[0][name]), "MiB")
		figure(fmt.Sprintf("%s_%s_pss_%dpods", prefix, name, pods), mib(m[1][name]), "MiB")
		total += m[1][name]
	}
	figure(fmt.Sprintf("%s_node_pss_%dpods", prefix, pods), mib(total), "MiB")
	figure(fmt.Sprintf("%s_node_pss_per_pod", prefix), perPodKiB(m, pods)/1024, "MiB")
}

// pidFile reads a PID file; 0 when it is missing or names no running process.
func pidFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return 0
	}
	return pid
}

func nonZero(pid int) []int {
	if pid <= 0 {
		return nil
	}
	return []int{pid}
}
