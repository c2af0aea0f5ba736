package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/logd"
	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

const (
	containerdSock = "/run/nodeagent/containerd/containerd.sock"
	benchPods      = 30
)

// podTiming is how long each step of starting one pod took.
type podTiming struct{ sandbox, create, start, total time.Duration }

// benchRuntime starts 30 pods one at a time (the two backends taking turns) and 30 at once on the built-in runtime and on containerd's CRI
// plugin (the reference), and prints p50/p99 per step, pods/s, and the built-in/CRI-plugin ratios. The pods one
// at a time run in rounds: with 30 pods the p99 is the slowest pod, which one slow runc start decides.
func benchRuntime(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("runtime", flag.ContinueOnError)
	execOnly := fs.Bool("exec-only", false, "measure only what an exec (an exec probe) costs on each backend")
	rounds := fs.Int("rounds", 3, "rounds of 30 pods one at a time on each backend; the first prints every figure, the later ones their pod p50/p99 ratios under _roundN, and the medians and worst of all rounds follow")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 {
		return errors.New("--rounds must be at least 1")
	}
	defer removePodLogDirs()
	builtin, plugin, err := benchBackends(ctx, nil)
	if err != nil {
		return err
	}
	defer builtin.Close()
	if *execOnly {
		return runExec(ctx, builtin, plugin)
	}
	results := map[string]map[string][]podTiming{"builtin": {}, "criplugin": {}}
	walls := map[string]time.Duration{}
	// Each backend first starts and removes one pod unmeasured, so that neither pays for first use (caches,
	// connections, page cache) in its figures. Then, one at a time, the backends take turns pod by pod (and
	// which goes first alternates), so that a change in the machine's load falls on both alike.
	for _, rt := range []cri.RuntimeService{builtin, plugin} {
		_, id, err := startPod(ctx, rt, -1)
		if id != "" {
			_ = rt.StopPodSandbox(ctx, id)
			_ = rt.RemovePodSandbox(ctx, id)
		}
		if err != nil {
			return fmt.Errorf("warm-up pod: %w", err)
		}
	}
	// Round 1's pods give every serial figure; each round adds its pod p50 and p99 ratios.
	var first [2][]podTiming
	var p50s, p99s []float64
	for round := 1; round <= *rounds; round++ {
		serial, err := runSerialInterleaved(ctx, builtin, plugin)
		if err != nil {
			return fmt.Errorf("serial round %d: %w", round, err)
		}
		b, p := stepDurations(serial[0], "pod"), stepDurations(serial[1], "pod")
		p50s = append(p50s, ratio(percentile(b, 50), percentile(p, 50)))
		p99s = append(p99s, ratio(percentile(b, 99), percentile(p, 99)))
		if round == 1 {
			first = serial
			continue
		}
		fmt.Printf("runtime_serial_round%d_pod_p50_ratio_builtin_vs_criplugin: %.2f x\n", round, p50s[round-1])
		fmt.Printf("runtime_serial_round%d_pod_p99_ratio_builtin_vs_criplugin: %.2f x\n", round, p99s[round-1])
	}
	for i, name := range []string{"builtin", "criplugin"} {
		results[name]["serial"] = first[i]
		for _, t := range first[i] {
			walls[name+"_serial"] += t.total
		}
	}
	for _, b := range []struct {
		name string
		rt   cri.RuntimeService
	}{{"builtin", builtin}, {"criplugin", plugin}} {
		ts, wall, err := runParallel(ctx, b.rt)
		if err != nil {
			return fmt.Errorf("%s parallel: %w", b.name, err)
		}
		results[b.name]["parallel"] = ts
		walls[b.name+"_parallel"] = wall
	}
	for _, mode := range []string{"serial", "parallel"} {
		for _, name := range []string{"builtin", "criplugin"} {
			ts := results[name][mode]
			for _, step := range []string{"sandbox", "create", "start", "pod"} {
				ds := stepDurations(ts, step)
				fmt.Printf("runtime_%s_%s_%s_p50: %.1f ms\n", name, mode, step, ms(percentile(ds, 50)))
				fmt.Printf("runtime_%s_%s_%s_p99: %.1f ms\n", name, mode, step, ms(percentile(ds, 99)))
			}
			fmt.Printf("runtime_%s_%s_pods_per_second: %.1f pods/s\n", name, mode, float64(len(ts))/walls[name+"_"+mode].Seconds())
		}
		b, p := stepDurations(results["builtin"][mode], "pod"), stepDurations(results["criplugin"][mode], "pod")
		fmt.Printf("runtime_%s_pod_p50_ratio_builtin_vs_criplugin: %.2f x\n", mode, ratio(percentile(b, 50), percentile(p, 50)))
		fmt.Printf("runtime_%s_pod_p99_ratio_builtin_vs_criplugin: %.2f x\n", mode, ratio(percentile(b, 99), percentile(p, 99)))
		fmt.Printf("runtime_%s_throughput_ratio_builtin_vs_criplugin: %.2f x\n", mode,
			walls["criplugin_"+mode].Seconds()/walls["builtin_"+mode].Seconds())
	}
	fmt.Printf("runtime_serial_pod_p50_ratio_builtin_vs_criplugin_median: %.2f x\n", median(p50s))
	fmt.Printf("runtime_serial_pod_p50_ratio_builtin_vs_criplugin_worst: %.2f x\n", slices.Max(p50s))
	fmt.Printf("runtime_serial_pod_p99_ratio_builtin_vs_criplugin_median: %.2f x\n", median(p99s))
	fmt.Printf("runtime_serial_pod_p99_ratio_builtin_vs_criplugin_worst: %.2f x\n", slices.Max(p99s))
	return runExec(ctx, builtin, plugin)
}

// runSerialInterleaved starts benchPods pods one at a time on each of a and b, alternating between them, then
// stops and removes them; it returns the timings of a's pods and of b's.
func runSerialInterleaved(ctx context.Context, a, b cri.RuntimeService) ([2][]podTiming, error) {
	var out [2][]podTiming
	rts := [2]cri.RuntimeService{a, b}
	var sandboxes [2][]string
	defer func() {
		for k, ids := range sandboxes {
			for _, id := range ids {
				_ = rts[k].StopPodSandbox(ctx, id)
				_ = rts[k].RemovePodSandbox(ctx, id)
			}
		}
	}()
	for i := 0; i < benchPods; i++ {
		for j := 0; j < 2; j++ {
			k := (i + j) % 2
			t, id, err := startPod(ctx, rts[k], i)
			if id != "" {
				sandboxes[k] = append(sandboxes[k], id)
			}
			if err != nil {
				return out, err
			}
			out[k] = append(out[k], t)
		}
	}
	return out, nil
}

// runParallel starts benchPods pods (sandbox + one container) all at once, then stops and removes them.
func runParallel(ctx context.Context, rt cri.RuntimeService) ([]podTiming, time.Duration, error) {
	timings := make([]podTiming, benchPods)
	sandboxes := make([]string, benchPods)
	errs := make([]error, benchPods)
	begin := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < benchPods; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			timings[i], sandboxes[i], errs[i] = startPod(ctx, rt, i)
		}(i)
	}
	wg.Wait()
	wall := time.Since(begin)
	for _, id := range sandboxes {
		if id == "" {
			continue
		}
		_ = rt.StopPodSandbox(ctx, id)
		_ = rt.RemovePodSandbox(ctx, id)
	}
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return timings, wall, nil
}

// benchLogDirs are the pods' log directories the bench asks the runtimes for (a kubelet's to remove: the
// runtime leaves them).
const benchLogDirs = "/var/log/pods/bench_bench-*"

func removePodLogDirs() {
	dirs, _ := filepath.Glob(benchLogDirs)
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// benchSandbox is the sandbox config of bench pod i: a fresh UID, its log directory and pod cgroup.
func benchSandbox(i int) *runtimeapi.PodSandboxConfig {
	uid := uuid.NewString()
	name := fmt.Sprintf("bench-%d", i)
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "bench", Uid: uid},
		Hostname:     name,
		LogDirectory: filepath.Join("/var/log/pods", "bench_"+name+"_"+uid),
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/nodeagent-bench/pod" + uid},
	}
}

func startPod(ctx context.Context, rt cri.RuntimeService, i int) (podTiming, string, error) {
	sb := benchSandbox(i)
	var t podTiming
	t0 := time.Now()
	id, err := rt.RunPodSandbox(ctx, sb, "")
	if err != nil {
		return t, "", err
	}
	t1 := time.Now()
	cid, err := rt.CreateContainer(ctx, id, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "localhost/busybox:1.35"},
		Command:  []string{"sleep", "3600"},
		LogPath:  "app/0.log",
	}, sb)
	if err != nil {
		return t, id, err
	}
	t2 := time.Now()
	if err := rt.StartContainer(ctx, cid); err != nil {
		return t, id, err
	}
	t3 := time.Now()
	return podTiming{sandbox: t1.Sub(t0), create: t2.Sub(t1), start: t3.Sub(t2), total: t3.Sub(t0)}, id, nil
}

func stepDurations(ts []podTiming, step string) []time.Duration {
	out := make([]time.Duration, 0, len(ts))
	for _, t := range ts {
		switch step {
		case "sandbox":
			out = append(out, t.sandbox)
		case "create":
			out = append(out, t.create)
		case "start":
			out = append(out, t.start)
		default:
			out = append(out, t.total)
		}
	}
	return out
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(float64(len(s))*p/100+0.5) - 1
	if idx < 0 {
		idx = 0
	}
	if idx >= len(s) {
		idx = len(s) - 1
	}
	return s[idx]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// benchBackends opens the two backends the runtime benchmarks compare: the built-in runtime in this process
// (in the host's containerd, namespace nodeagent; its containers' output copied by logs, or in this process
// when nil) and containerd's CRI plugin.
func benchBackends(ctx context.Context, logs logd.Service) (*runtime.Runtime, cri.RuntimeService, error) {
	builtin, err := runtime.New(ctx, runtime.Config{
		Address: containerdSock, Namespace: "nodeagent", StateDir: "/var/lib/nodeagent/bench/state",
		FIFODir: "/run/nodeagent/bench-fifo", PauseImage: "localhost/pause:3.10",
		PauseImageArchive: "/var/lib/nodeagent/images/pause.tar", ImageFsDir: "/var/lib/nodeagent/containerd",
		ContainerdStateDir: "/run/nodeagent/containerd", Logs: logs,
		Network: cni.New(cni.Config{ConfDir: "/etc/nodeagent/cni/net.d", BinDirs: []string{"/usr/lib/cni"}}),
	})
	if err != nil {
		return nil, nil, err
	}
	plugin, _, err := remote.Connect(containerdSock, time.Minute)
	if err != nil {
		builtin.Close()
		return nil, nil, err
	}
	return builtin, plugin, nil
}
