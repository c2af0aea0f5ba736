package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// offlineGrace is the grace period the offline boots run with: the figure includes it.
const offlineGrace = time.Second

// offlineHooks are what the offline phase does to the node around it: restart the kubelet (with more
// flags), stop and start the API server.
type offlineHooks struct {
	restartKubelet func(extra []string) error
	stopKubelet    func()
	stopAPI        func()
	startAPI       func() error
	workDir        string
}

// runOffline measures a node's boot with its API server away: 30 pods that tolerate the unreachable taint
// forever run; the node reboots (the kubelet stopped, every sandbox of its namespace removed) and the
// kubelet starts with the API server stopped: the time from its start to the 30 pods' containers running
// again (from the checkpoint, after a 1 s grace period), beside the same reboot with the API server up (the
// floor: the same pods from the API), alternating which comes first, for b.rounds rounds.
func (b *kubeletBench) runOffline(ctx context.Context, h offlineHooks) error {
	b.mutate = func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	}
	pods := names("offline", 30)
	progress("kubelet: 30 pods tolerating unreachable")
	if err := b.create(ctx, pods, 0, corev1.RestartPolicyAlways, func(int) []string { return []string{"sleep", "3600"} }); err != nil {
		return err
	}
	if err := b.watch.waitAll(ctx, pods, "Ready", 3*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
		return err
	}
	flags := []string{"--offline-autonomy-grace-period", offlineGrace.String()}
	if err := h.restartKubelet(flags); err != nil { // the grace period from here on
		return err
	}
	if err := b.waitRunning(ctx, len(pods), time.Minute); err != nil {
		return err
	}
	var online, offline []float64
	for round := 1; round <= b.rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		for _, away := range order {
			h.stopKubelet()
			if away {
				h.stopAPI()
			}
			if err := b.reboot(ctx, h.workDir); err != nil {
				return err
			}
			start := time.Now()
			if err := h.restartKubelet(flags); err != nil {
				return err
			}
			if err := b.waitRunning(ctx, len(pods), 2*time.Minute); err != nil {
				return fmt.Errorf("boot with the API server away=%v: %w; log tail:\n%s", away, err, b.kl.logTail(2000))
			}
			took := time.Since(start)
			progress("kubelet: 30 pods running %v after a boot with the API server away=%v (round %d)", took.Round(time.Millisecond), away, round)
			if away {
				offline = append(offline, ms(took))
				if err := h.startAPI(); err != nil {
					return err
				}
				if err := b.waitHealthy(ctx, time.Minute); err != nil {
					return err
				}
			} else {
				online = append(online, ms(took))
			}
		}
	}
	figure("kubelet_boot30_offline_running_median", median(offline), "ms")
	figure("kubelet_boot30_online_running_median", median(online), "ms")
	figure("kubelet_boot30_offline_grace_period", ms(offlineGrace), "ms")
	return b.deleteAndWait(ctx, pods)
}

// deleteAndWait deletes the pods and polls the API until it no longer has them (the pod watch cannot resume
// across the API server's restarts).
func (b *kubeletBench) deleteAndWait(ctx context.Context, pods []string) error {
	grace := int64(2)
	for _, name := range pods {
		if err := b.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := b.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("the offline phase's pods not gone after 3m; log tail:\n%s", b.kl.logTail(2000))
}

// reboot removes every sandbox (and container) of the kubelet's namespace while the kubelet is stopped, as
// a reboot does.
func (b *kubeletBench) reboot(ctx context.Context, dir string) error {
	rt, err := openRuntime(ctx, kubeletNamespace, filepath.Join(dir, "reboot"))
	if err != nil {
		return err
	}
	defer rt.Close()
	_, err = removeAllSandboxes(ctx, rt, 8)
	return err
}

// waitRunning waits until the kubelet's runtime runs n containers, reconnecting to its CRI socket (the
// kubelet's, served again after each start).
func (b *kubeletBench) waitRunning(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	running := 0
	for time.Now().Before(deadline) {
		if err, ok := b.kl.exited(); ok {
			return fmt.Errorf("kubelet exited: %v", err)
		}
		if rt, _, err := remote.Connect(b.kl.criSocket, 2*time.Second); err == nil {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ctrs, err := rt.ListContainers(cctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
			cancel()
			if err == nil {
				if running = len(ctrs); running >= n {
					return nil
				}
			}
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%d of %d containers running after %v", running, n, timeout)
}
