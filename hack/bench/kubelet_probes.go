package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
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

var lateRE = regexp.MustCompile(`"Probe started".* late="([^"]+)"`)

// runProbes measures 110 pods with an exec readiness probe and an HTTP liveness probe every 10 s beside the
// same 110 pods without probes: the kubelet's idle CPU of each (kubelet_idle_cpu_110pods_{bare,probed}),
// how late probes start after their tick (from the kubelet's -v 4 log), and what the probes cost containerd
// and the shims, per exec probe.
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
		offset := fileSize(b.kl.logPath)
		ctrd, shims := containerdPIDs(), shimPIDs(kubeletNamespace)
		before := readGroup(append(ctrd, shims...))
		start := time.Now()
		stopPprof := b.pprof(ctx, "kubelet_idle_110pods_"+kind) // with --pprof: where the probes' CPU goes
		err := b.idleWindow(ctx, "110pods_"+kind)
		stopPprof()
		if err != nil {
			return err
		}
		after := readGroup(append(containerdPIDs(), shimPIDs(kubeletNamespace)...))
		window[i] = time.Since(start)
		execCPU[i] = groupCPUPercent(before, after) / 100 * window[i].Seconds()
		if probed {
			if err := printLateness(b.kl.logPath, offset, window[i]); err != nil {
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

// printLateness reads the "Probe started" lines the kubelet logged after offset and prints how late the
// probes started after their ticks.
func printLateness(logPath string, offset int64, window time.Duration) error {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	if offset > int64(len(data)) {
		offset = 0
	}
	var late []time.Duration
	for _, m := range lateRE.FindAllSubmatch(data[offset:], -1) {
		if d, err := time.ParseDuration(string(m[1])); err == nil {
			late = append(late, d)
		}
	}
	if len(late) == 0 {
		return fmt.Errorf("no probe was logged in %s (the kubelet must run with -v 4)", logPath)
	}
	figure("kubelet_probes_per_second", float64(len(late))/window.Seconds(), "probes/s")
	figure("kubelet_probes_late_p50", ms(percentile(late, 50)), "ms")
	figure("kubelet_probes_late_p99", ms(percentile(late, 99)), "ms")
	figure("kubelet_probes_late_max", ms(percentile(late, 100)), "ms")
	return nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
