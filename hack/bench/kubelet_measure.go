package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// idleWindow waits for the kubelet to settle, then reads its RSS and CPU over the idle window.
func (b *kubeletBench) idleWindow(ctx context.Context, label string) error {
	progress("idle window at %s (%v)", label, b.idleFor)
	if err := sleepCtx(ctx, 5*time.Second); err != nil {
		return err
	}
	stopPerf := b.perf("kubelet_idle_" + label)
	a, err := readProc(b.kl.pid())
	if err != nil {
		stopPerf()
		return err
	}
	apiPID := b.apiPID()
	var apiA procSample
	if apiPID > 0 {
		apiA, _ = readProc(apiPID)
	}
	// What the kubelet's idle work costs the runtime: containerd (shared with everything else on the host)
	// and the shims of the kubelet's pods (its relists ask each of them for its tasks' state).
	containerd, shims := containerdPIDs(), shimPIDs(b.podNamespace())
	ctrdA, shimA := readGroup(containerd), readGroup(shims)
	clearReferenced(b.kl.pid())
	if err := sleepCtx(ctx, b.idleFor); err != nil {
		stopPerf()
		return err
	}
	c, err := readProc(b.kl.pid())
	stopPerf()
	if err != nil {
		return err
	}
	b.heapProfile(ctx, "idle_"+label)
	what := "kubelet"
	figure(fmt.Sprintf("%s_rss_%s", what, label), mib(c.rssKiB), "MiB")
	figure(fmt.Sprintf("%s_rss_anon_%s", what, label), mib(c.anonKiB), "MiB")
	figure(fmt.Sprintf("%s_rss_file_%s", what, label), mib(c.fileKiB), "MiB")
	figure(fmt.Sprintf("%s_rss_peak_%s", what, label), mib(c.hwmKiB), "MiB")
	if file, anon, err := referenced(b.kl.pid()); err == nil {
		// What the kubelet touched during the window: its working set, at 4 KiB granularity, where the
		// resident set counts every page the kernel mapped around a touched one.
		figure(fmt.Sprintf("%s_touched_file_%s", what, label), mib(file), "MiB")
		figure(fmt.Sprintf("%s_touched_anon_%s", what, label), mib(anon), "MiB")
	}
	figure(fmt.Sprintf("%s_idle_cpu_%s", what, label), cpuPercent(a, c), "%core")
	if c.childTicks > a.childTicks {
		figure(fmt.Sprintf("%s_idle_children_cpu_%s", what, label), float64(c.childTicks-a.childTicks)/clockTicks/c.at.Sub(a.at).Seconds()*100, "%core")
	}
	ctrdC, shimC := readGroup(containerd), readGroup(shims)
	figure("containerd_idle_cpu_"+label, groupCPUPercent(ctrdA, ctrdC), "%core")
	if len(shims) > 0 {
		figure("kubelet_pod_shims_idle_cpu_"+label, groupCPUPercent(shimA, shimC), "%core")
		figure("kubelet_pod_shims_pss_"+label, mib(shimC.pssKiB), "MiB")
	}
	if apiPID > 0 {
		if apiC, err := readProc(apiPID); err == nil {
			figure("apiserver_rss_"+label, mib(apiC.rssKiB), "MiB")
			figure("apiserver_idle_cpu_"+label, cpuPercent(apiA, apiC), "%core")
		}
	}
	return nil
}

// apiPID is the API server's process: the bench's own (--external-apiserver) or the standalone kubelet's
// child; 0 if there is none.
func (b *kubeletBench) apiPID() int {
	if b.api != nil {
		return b.api.cmd.Process.Pid
	}
	if b.apiProc > 0 {
		return b.apiProc
	}
	pids := findProcs(func(c string) bool { return strings.Contains(c, " --node-kubeconfig "+benchNode+"=") })
	if len(pids) != 1 {
		return 0
	}
	return pids[0]
}

// clearReferenced resets the accessed bits of the process's pages, so that referenced can tell what it
// touches from now on.
func clearReferenced(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("1"), 0)
}

// referenced sums the pages the process touched since clearReferenced, file-backed and anonymous, in KiB.
func referenced(pid int) (fileKiB, anonKiB int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, 0, err
	}
	file := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			file = len(f) >= 6 && strings.HasPrefix(f[5], "/")
		case len(f) >= 2 && f[0] == "Referenced:":
			v, _ := strconv.ParseInt(f[1], 10, 64)
			if file {
				fileKiB += v
			} else {
				anonKiB += v
			}
		}
	}
	return fileKiB, anonKiB, nil
}

// relist times what a full PLEG relist asks of the runtime, ListPodSandbox then ListContainers, over the
// kubelet's CRI socket (so with a gRPC round trip more than the kubelet's in-process calls).
func (b *kubeletBench) relist(ctx context.Context, label string) {
	var total, sbs, ctrs []time.Duration
	nsb, nctr := 0, 0
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		s, err1 := b.cri.ListPodSandbox(ctx, nil)
		t1 := time.Now()
		c, err2 := b.cri.ListContainers(ctx, nil)
		t2 := time.Now()
		if err1 != nil || err2 != nil {
			progress("relist %s: %v %v", label, err1, err2)
			return
		}
		nsb, nctr = len(s), len(c)
		total, sbs, ctrs = append(total, t2.Sub(t0)), append(sbs, t1.Sub(t0)), append(ctrs, t2.Sub(t1))
		_ = sleepCtx(ctx, 50*time.Millisecond)
	}
	printLatencies("relist_"+label, total)
	figure("relist_"+label+"_list_pod_sandbox_p50", ms(percentile(sbs, 50)), "ms")
	figure("relist_"+label+"_list_containers_p50", ms(percentile(ctrs, 50)), "ms")
	progress("relist %s: %d sandboxes, %d containers", label, nsb, nctr)
}

// relistSampler times ListPodSandbox+ListContainers over the CRI socket twice a second until the returned
// function is called, which returns the durations: what a relist costs while pods start.
func (b *kubeletBench) relistSampler(ctx context.Context) func() []time.Duration {
	if !b.sampleRelist {
		return func() []time.Duration { return nil }
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan []time.Duration, 1)
	go func() {
		var out []time.Duration
		for sleepCtx(sctx, 500*time.Millisecond) == nil {
			t0 := time.Now()
			if _, err := b.cri.ListPodSandbox(sctx, nil); err != nil {
				break
			}
			if _, err := b.cri.ListContainers(sctx, nil); err != nil {
				break
			}
			out = append(out, time.Since(t0))
		}
		done <- out
	}()
	return func() []time.Duration {
		cancel()
		return <-done
	}
}

func printRuntimeCPU(label string, stop func() (float64, float64)) {
	c, s := stop()
	figure(label+"_containerd_cpu", c, "core-s")
	figure(label+"_pod_shims_cpu", s, "core-s")
}

// perf records a CPU profile of the kubelet until the returned function is called (with --perf).
func (b *kubeletBench) perf(label string) func() {
	if b.perfDir == "" {
		return func() {}
	}
	if err := os.MkdirAll(b.perfDir, 0o755); err != nil {
		progress("perf: %v", err)
		return func() {}
	}
	cmd := exec.Command("perf", "record", "-q", "-F", "499", "-g", "-p", fmt.Sprint(b.kl.pid()),
		"-o", filepath.Join(b.perfDir, label+".data"))
	if err := cmd.Start(); err != nil {
		progress("perf: %v", err)
		return func() {}
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	}
}

// heapProfile saves the kubelet's heap profile and prints its number of goroutines (with --pprof).
func (b *kubeletBench) heapProfile(ctx context.Context, label string) {
	if b.pprofDir == "" {
		return
	}
	get := func(path, debug string) ([]byte, error) {
		return b.client.CoreV1().RESTClient().Get().
			AbsPath("/api/v1/nodes", benchNode, "proxy/debug/pprof", path).Param("debug", debug).Timeout(30 * time.Second).DoRaw(ctx)
	}
	if data, err := get("goroutine", "1"); err == nil {
		var n int
		if _, err := fmt.Sscanf(string(data), "goroutine profile: total %d", &n); err == nil {
			figure("kubelet_goroutines_"+label, float64(n), "goroutines")
		}
	}
	data, err := get("heap", "0")
	if err == nil {
		err = os.MkdirAll(b.pprofDir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(b.pprofDir, "heap_"+label+".pprof"), data, 0o644)
	}
	if err != nil {
		progress("heap profile %s: %v", label, err)
	}
}

// pprof saves a Go CPU profile of the kubelet, read through the API server's node proxy, from now for
// b.pprofFor (with --pprof); the returned function waits for it.
func (b *kubeletBench) pprof(ctx context.Context, label string) func() {
	if b.pprofDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err := b.client.CoreV1().RESTClient().Get().
			AbsPath("/api/v1/nodes", benchNode, "proxy/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(b.pprofFor.Seconds()))).
			Timeout(b.pprofFor + 30*time.Second).DoRaw(ctx)
		if err == nil {
			err = os.MkdirAll(b.pprofDir, 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(b.pprofDir, label+".pprof"), data, 0o644)
		}
		if err != nil {
			progress("pprof %s: %v", label, err)
		}
	}()
	return func() { <-done }
}
