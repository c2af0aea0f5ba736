package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// runUserns measures 30 pods at once with hostUsers: false (each its own user namespace, its range written
// to its directory, its mounts ID-mapped by the runtime) beside 30 plain pods, alternating which goes first,
// for b.rounds rounds, on the kubelet's runtime (rt names it in the figures: builtin, or cri_plugin for
// containerd's CRI plugin): a user namespace's cost on the way to Ready is the difference of the two p99s.
func (b *kubeletBench) runUserns(ctx context.Context, rt string) error {
	var plain, userns []time.Duration
	defer func() { b.mutate = nil }()
	for round := 1; round <= b.rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		for _, withUserns := range order {
			kind := "plain"
			if withUserns {
				kind = "userns"
			}
			pods := names(fmt.Sprintf("%s%d", kind, round), 30)
			b.mutate = func(p *corev1.Pod) {
				if withUserns {
					p.Spec.HostUsers = ptr.To(false)
				}
			}
			label := fmt.Sprintf("kubelet_burst30_%s_%s_round%d", kind, rt, round)
			progress("kubelet: 30 pods at once on the %s runtime, %s, round %d", rt, kind, round)
			p99, err := b.burstP99(ctx, label, pods)
			if err != nil {
				return err
			}
			if withUserns {
				userns = append(userns, p99)
			} else {
				plain = append(plain, p99)
			}
			if _, err := b.deleteGone(ctx, label+"_delete", pods); err != nil {
				return err
			}
		}
	}
	mp, mu := median(plain), median(userns)
	figure("kubelet_burst30_plain_"+rt+"_p99_median", ms(mp), "ms")
	figure("kubelet_burst30_userns_"+rt+"_p99_median", ms(mu), "ms")
	figure("kubelet_burst30_userns_over_plain_"+rt+"_p99", 100*(float64(mu)-float64(mp))/float64(mp), "%")
	return nil
}
