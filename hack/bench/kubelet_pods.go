package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pods a phase makes and ends through the API: created (at once or at a rate), deleted, run to exit.

// create sends one create call per pod, all at once or one every interval, each from its own goroutine.
func (b *kubeletBench) create(ctx context.Context, pods []string, interval time.Duration, restart corev1.RestartPolicy, cmd func(int) []string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	begin := time.Now()
	for i, name := range pods {
		if interval > 0 {
			if err := sleepCtx(ctx, time.Until(begin.Add(time.Duration(i)*interval))); err != nil {
				return err
			}
		}
		pod := benchPodSpec(name, b.nodeName(), pods[0], restart, cmd(i)...)
		if b.mutate != nil {
			b.mutate(pod)
		}
		wg.Add(1)
		go func(i int, pod *corev1.Pod) {
			defer wg.Done()
			t0 := time.Now()
			b.watch.mark(pod.Name, func(t *podTimes) { t.created = t0 })
			_, errs[i] = b.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			took := time.Since(t0)
			b.watch.mark(pod.Name, func(t *podTimes) { t.createCall = took })
		}(i, pod)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// deleteGone deletes the pods at once with a 2 s grace period and waits until the API no longer has them.
func (b *kubeletBench) deleteGone(ctx context.Context, label string, pods []string) (time.Duration, error) {
	stopPerf := b.perf(label)
	defer stopPerf()
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	grace := int64(2)
	for i, name := range pods {
		wg.Add(1)
		go func(i int, name string) {
			defer wg.Done()
			b.watch.mark(name, func(t *podTimes) { t.deleteSent = time.Now() })
			errs[i] = b.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		}(i, name)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("%s: %w", label, err)
	}
	if err := b.watch.waitAll(ctx, pods, "gone", 3*time.Minute, func(t *podTimes) bool { return !t.gone.IsZero() }); err != nil {
		return 0, fmt.Errorf("%s: %w; log tail:\n%s", label, err, b.kl.logTail(2000))
	}
	ts := b.watch.times(pods)
	var lat []time.Duration
	first, last := ts[0].deleteSent, ts[0].gone
	for _, t := range ts {
		lat = append(lat, t.gone.Sub(t.deleteSent))
		if t.deleteSent.Before(first) {
			first = t.deleteSent
		}
		if t.gone.After(last) {
			last = t.gone
		}
	}
	printLatencies(label+"_gone", lat)
	figure(label+"_first_gone", ms(percentile(lat, 0)), "ms")
	figure(label+"_all_gone", ms(last.Sub(first)), "ms")
	// The node's own teardown (the runtime's background task deletions, the kubelet's removal of the stopped
	// containers and sandboxes) may go on after the API shows the pods gone; the next phase starts when the
	// pods' shims have exited, so that it does not share the CPU with this one's leftovers.
	for deadline := time.Now().Add(time.Minute); len(shimPIDs(b.podNamespace())) > b.keepShims; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			progress("%s: shims still running a minute after the deletion", label)
			break
		}
	}
	figure(label+"_shims_gone", ms(time.Since(first)), "ms")
	return last.Sub(first), nil
}

// exits runs n pods (restartPolicy Never, 5 created per second) whose container sleeps 1 to 5 s, writes the
// time in microseconds into its termination message and exits; it prints the time from that moment to the
// watch showing the container terminated.
func (b *kubeletBench) exits(ctx context.Context, round, n int) error {
	prefix, suffix := "exit", ""
	if round > 1 {
		prefix, suffix = fmt.Sprintf("exit%d", round), fmt.Sprintf("_round%d", round)
	}
	pods := names(prefix, n)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	sleeps := make([]float64, n)
	for i := range sleeps {
		sleeps[i] = 1 + 4*rng.Float64()
	}
	// adjtimex's "tv_usec" is nanoseconds when the clock's status has STA_NANO (0x2000), as an NTP daemon
	// may set it: the status goes with the time, and messageTime reads both.
	script := `sleep %.2f; adjtimex | awk '/tv_sec/{s=$2} /tv_usec/{u=$2} /status/{st=$2} END{printf "%%d %%d %%d", s, u, st}' > /dev/termination-log`
	stopPerf := b.perf("kubelet_exit30")
	err := b.create(ctx, pods, 200*time.Millisecond, corev1.RestartPolicyNever, func(i int) []string {
		return []string{"sh", "-c", fmt.Sprintf(script, sleeps[i])}
	})
	if err == nil {
		err = b.watch.waitAll(ctx, pods, "terminated", 2*time.Minute, func(t *podTimes) bool { return !t.terminated.IsZero() })
	}
	stopPerf()
	if err != nil {
		return fmt.Errorf("exit pods: %w; log tail:\n%s", err, b.kl.logTail(2000))
	}
	var lat, announced, toSend, patch, toSeen []time.Duration
	bad := 0
	stages := readStages(b.kl.logPath)
	for i, t := range b.watch.times(pods) {
		at, ok := messageTime(t.message)
		if !ok {
			bad++
			continue
		}
		lat = append(lat, t.terminated.Sub(at))
		// Where the time went, from the kubelet's log: the runtime announcing the exit, the status patch that
		// made the pod terminal sent and answered, the watch showing it.
		if s := stages[pods[i]]; s != nil && !s.exited.IsZero() && !s.terminalWritten.IsZero() {
			announced = append(announced, s.exited.Sub(at))
			toSend = append(toSend, s.terminalSent.Sub(s.exited))
			patch = append(patch, s.terminalWritten.Sub(s.terminalSent))
			toSeen = append(toSeen, t.terminated.Sub(s.terminalWritten))
		}
	}
	if bad > 0 {
		progress("%d exit pods had no readable termination message", bad)
	}
	printLatencies("kubelet_exit_to_api"+suffix, lat)
	if len(announced) == 0 {
		progress("exit pods: no exit or terminal patch lines in the kubelet's log (needs -v 3)")
	} else {
		printLatencies("kubelet_exit_stage_exit_to_announced"+suffix, announced)
		printLatencies("kubelet_exit_stage_announced_to_patch_sent"+suffix, toSend)
		printLatencies("kubelet_exit_stage_patch"+suffix, patch)
		printLatencies("kubelet_exit_stage_patched_to_watch"+suffix, toSeen)
	}
	// The pod's own grace period: the kubelet confirms the deletion once everything is gone, so the next
	// phase starts on a clean node.
	for _, name := range pods {
		_ = b.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	}
	return b.watch.waitAll(ctx, pods, "gone", 2*time.Minute, func(t *podTimes) bool { return !t.gone.IsZero() })
}
