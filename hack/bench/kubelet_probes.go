package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probedPodCommand serves HTTP on 8080 and has /tmp/ready, for a probed pod and its bare twin alike.
var probedPodCommand = []string{"sh", "-c", "touch /tmp/ready; mkdir -p /www; echo ok > /www/index.html; exec httpd -f -p 8080 -h /www"}

// probeMutation gives a bench pod an exec readiness probe and an HTTP liveness probe, every 10 s.
func probeMutation(p *corev1.Pod) {
	c := &p.Spec.Containers[0]
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
}

var lateRE = regexp.MustCompile(`(?m)^prober_probe_start_lateness_seconds_bucket\{le="([^"]+)"\} (\d+)$`)

// runProbes measures 110 pods with an exec readiness probe and an HTTP liveness probe every 10 s beside the
// same 110 pods without probes: the kubelet's idle CPU of each (kubelet_idle_cpu_110pods_{bare,probed}),
// how late probes start after their tick (from the kubelet's prober_probe_start_lateness_seconds), and what
// the probes cost containerd and the shims, per exec probe. The kubelet runs at -v 2, as nodes run it.
func (b *kubeletBench) runProbes(ctx context.Context) error {
	defer func() { b.mutate = nil }()
	var execCPU [2]float64 // containerd + shims CPU seconds in the idle window: bare, probed
	var window [2]time.Duration
	for i, probed := range []bool{false, true} {
		kind := "bare"
		b.mutate = nil
		if probed {
			kind, b.mutate = "probed", probeMutation
		}
		pods := names(kind, 110)
		progress("kubelet: 110 %s pods at 10/s", kind)
		if err := b.create(ctx, pods, 100*time.Millisecond, corev1.RestartPolicyAlways, func(int) []string { return probedPodCommand }); err != nil {
			return err
		}
		if err := b.watch.waitAll(ctx, pods, "Ready", 5*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
			return fmt.Errorf("%s pods: %w; log tail:\n%s", kind, err, b.kl.logTail(2000))
		}
		lateBefore, err := b.probeLateness(ctx)
		if err != nil {
			return err
		}
		ctrd, shims := containerdPIDs(), shimPIDs(kubeletNamespace)
		before := readGroup(append(ctrd, shims...))
		start := time.Now()
		stopPprof := b.pprof(ctx, "kubelet_idle_110pods_"+kind) // with --pprof: where the probes' CPU goes
		err = b.idleWindow(ctx, "110pods_"+kind)
		stopPprof()
		if err != nil {
			return err
		}
		after := readGroup(append(containerdPIDs(), shimPIDs(kubeletNamespace)...))
		window[i] = time.Since(start)
		execCPU[i] = groupCPUPercent(before, after) / 100 * window[i].Seconds()
		if probed {
			lateAfter, err := b.probeLateness(ctx)
			if err != nil {
				return err
			}
			if err := printLateness(lateBefore, lateAfter, window[i]); err != nil {
				return err
			}
		}
		if _, err := b.deleteGone(ctx, "kubelet_delete110_"+kind, pods); err != nil {
			return err
		}
	}
	// 110 exec probes every 10 s: what they add to containerd and the shims, per probe (a runc exec each).
	execs := 110 * window[1].Seconds() / 10
	figure("kubelet_probes_exec_cost", (execCPU[1]-execCPU[0]*window[1].Seconds()/window[0].Seconds())/execs*1000, "ms-cpu/probe")
	return nil
}

// probeLateness reads the kubelet's prober_probe_start_lateness_seconds buckets (cumulative counts by upper
// bound, in seconds; +Inf left out).
func (b *kubeletBench) probeLateness(ctx context.Context) (map[float64]float64, error) {
	data, err := b.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", benchNode, "proxy/metrics/probes").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("/metrics/probes: %w", err)
	}
	out := map[float64]float64{}
	for _, m := range lateRE.FindAllSubmatch(data, -1) {
		le, err1 := strconv.ParseFloat(string(m[1]), 64)
		n, err2 := strconv.ParseFloat(string(m[2]), 64)
		if err1 == nil && err2 == nil {
			out[le] = n
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("/metrics/probes has no prober_probe_start_lateness_seconds:\n%s", data)
	}
	return out, nil
}

// printLateness prints how many probes started in the window and, from the histogram's difference, the
// bucket bounds within which half, 99% and all of them started after their ticks.
func printLateness(before, after map[float64]float64, window time.Duration) error {
	bounds := slices.Sorted(maps.Keys(after))
	total := after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	if total <= 0 {
		return fmt.Errorf("no probe started in the window")
	}
	at := func(q float64) float64 {
		for _, le := range bounds {
			if after[le]-before[le] >= q*total {
				return le * 1000
			}
		}
		return math.Inf(1)
	}
	figure("kubelet_probes_per_second", total/window.Seconds(), "probes/s")
	figure("kubelet_probes_late_p50_under", at(0.5), "ms")
	figure("kubelet_probes_late_p99_under", at(0.99), "ms")
	figure("kubelet_probes_late_max_under", at(1), "ms")
	return nil
}
