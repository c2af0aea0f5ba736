package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// runTimelines measures what the debug page's startup timelines cost a 30-pod burst: rounds of a burst with
// them on and one with them off (--debug-timelines=false), the kubelet restarted between the two on the
// same node and the same API server, in alternating order so that neither mode always comes first. The off
// bursts are the floor; the figures are the medians over the rounds and the difference of the two.
func (b *kubeletBench) runTimelines(ctx context.Context, restart func(timelines bool) error) error {
	var on50, on99, off50, off99 []float64
	current := true // the kubelet starts with timelines on, the default
	for round := 1; round <= b.rounds; round++ {
		order := []bool{true, false}
		if round%2 == 0 {
			order = []bool{false, true}
		}
		for _, timelines := range order {
			if timelines != current {
				progress("kubelet: restarting with --debug-timelines=%t", timelines)
				if err := restart(timelines); err != nil {
					return err
				}
				current = timelines
			}
			mode := map[bool]string{true: "on", false: "off"}[timelines]
			progress("kubelet: 30 pods at once, timelines %s (round %d)", mode, round)
			pods := names(fmt.Sprintf("tl%s%d", mode, round), 30)
			if err := b.create(ctx, pods, 0, corev1.RestartPolicyAlways, func(int) []string { return []string{"sleep", "3600"} }); err != nil {
				return err
			}
			if err := b.watch.waitAll(ctx, pods, "Ready", 3*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
				return fmt.Errorf("timelines %s: %w; log tail:\n%s", mode, err, b.kl.logTail(2000))
			}
			var lat []time.Duration
			for _, t := range b.watch.times(pods) {
				lat = append(lat, t.ready.Sub(t.created))
			}
			p50, p99 := ms(percentile(lat, 50)), ms(percentile(lat, 99))
			if timelines {
				on50, on99 = append(on50, p50), append(on99, p99)
			} else {
				off50, off99 = append(off50, p50), append(off99, p99)
			}
			if _, err := b.deleteGone(ctx, fmt.Sprintf("kubelet_delete30_timelines_%s_round%d", mode, round), pods); err != nil {
				return err
			}
		}
	}
	figure("kubelet_burst30_timelines_on_create_to_ready_p50_median", median(on50), "ms")
	figure("kubelet_burst30_timelines_off_create_to_ready_p50_median", median(off50), "ms")
	figure("kubelet_burst30_timelines_on_create_to_ready_p99_median", median(on99), "ms")
	figure("kubelet_burst30_timelines_off_create_to_ready_p99_median", median(off99), "ms")
	figure("kubelet_burst30_timelines_cost_p50", median(on50)-median(off50), "ms")
	figure("kubelet_burst30_timelines_cost_p99", median(on99)-median(off99), "ms")
	return nil
}

// waitHealthy waits until the kubelet's own /healthz answers 200 (its sync loop and PLEG run), then lets it
// settle a few seconds: the Node in the API still says Ready from before a restart.
func (b *kubeletBench) waitHealthy(ctx context.Context, timeout time.Duration) error {
	client, err := b.endpointClient()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		if err, ok := b.kl.exited(); ok {
			return fmt.Errorf("kubelet exited: %v; log tail:\n%s", err, b.kl.logTail(3000))
		}
		_, err := getAll(ctx, client, fmt.Sprintf("https://127.0.0.1:%d/healthz", b.kl.port))
		if err == nil {
			return sleepCtx(ctx, 3*time.Second)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubelet not healthy after %v: %w", timeout, err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}
