package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nodeagent/kubelet/pkg/runtime"
)

// burstResult is what one round of the 30-pod burst measured.
type burstResult struct {
	overFloor time.Duration // the kubelet's create-to-Ready p99 over the floor's p99
	deleted   time.Duration // the first delete sent to the last pod gone from the API
}

// burstRound starts 30 pods at once on the floor and removes them, then creates 30 pods at once through the
// API and deletes them (grace 2 s). The first round prints its figures under their plain names and measures
// the node at rest with the 30 pods; later rounds print theirs under _roundN. The machine's load moves the
// latencies by about ±100 ms from one burst to the next, so one round alone says little about a change.
func (b *kubeletBench) burstRound(ctx context.Context, floorRT *runtime.Runtime, round int) (burstResult, error) {
	suffix := ""
	if round > 1 {
		suffix = fmt.Sprintf("_round%d", round)
	}
	progress("floor: 30 pods at once%s", suffix)
	stopCPU := runtimeCPU(floorNamespace)
	fd, fsteps, fwall, err := floorRun(ctx, floorRT, b.floorLogs, 30, 0)
	if err != nil {
		return burstResult{}, fmt.Errorf("floor burst: %w", err)
	}
	printRuntimeCPU("floor_burst30"+suffix, stopCPU)
	printLatencies("floor_burst30"+suffix+"_pod", fd)
	printFloorSteps("floor_burst30"+suffix, fsteps)
	figure("floor_burst30"+suffix+"_pods_per_second", 30/fwall.Seconds(), "pods/s")
	// The floor of deletion: the same pods stopped and removed at once (no grace period).
	t0 := time.Now()
	if _, err := removeAllSandboxes(ctx, floorRT, 30); err != nil {
		return burstResult{}, fmt.Errorf("floor burst cleanup: %w", err)
	}
	figure("floor_burst30"+suffix+"_stop_and_remove_all", ms(time.Since(t0)), "ms")

	progress("kubelet: 30 pods at once%s", suffix)
	pods := names(fmt.Sprintf("burst%d", round), 30)
	var r burstResult
	if r.overFloor, err = b.createReady(ctx, "kubelet_burst30"+suffix, pods, 0, fd); err != nil {
		return r, err
	}
	if round == 1 {
		if err := b.idleWindow(ctx, "30pods"); err != nil {
			return r, err
		}
		b.relist(ctx, "30pods")
	}
	progress("kubelet: deleting 30 pods, grace 2 s%s", suffix)
	r.deleted, err = b.deleteGone(ctx, "kubelet_delete30"+suffix, pods)
	return r, err
}

// printRounds prints the median and the worst of the rounds' figures.
func printRounds(rs []burstResult) {
	over := make([]time.Duration, len(rs))
	deleted := make([]time.Duration, len(rs))
	for i, r := range rs {
		over[i], deleted[i] = r.overFloor, r.deleted
	}
	figure("kubelet_burst30_p99_over_floor_p99_median", ms(median(over)), "ms")
	figure("kubelet_burst30_p99_over_floor_p99_worst", ms(slices.Max(over)), "ms")
	figure("kubelet_delete30_all_gone_median", ms(median(deleted)), "ms")
	figure("kubelet_delete30_all_gone_worst", ms(slices.Max(deleted)), "ms")
}

// median is the middle value of ds (the mean of the two middle ones for an even count).
func median[T ~int64 | ~float64](ds []T) T {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
