package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// volumePodMutation gives a bench pod what almost every pod on a cluster has, a projected service account
// token (kube-api-access, which the API server injects), plus a configMap and a secret volume; bare pods
// opt out of the token.
func volumePodMutation(withVolumes bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if !withVolumes {
			off := false
			p.Spec.AutomountServiceAccountToken = &off
			return
		}
		p.Spec.Volumes = append(p.Spec.Volumes,
			corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "bench-config"}}}},
			corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "bench-creds"}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: "config", MountPath: "/config"}, corev1.VolumeMount{Name: "creds", MountPath: "/creds"})
	}
}

// runVolumes measures 30 pods at once with a projected token, a configMap and a secret volume beside 30 bare
// pods, alternating which goes first, for b.rounds rounds. The bare burst is the floor: the volumes' cost
// is the difference of the two p99s, printed as a percentage.
func (b *kubeletBench) runVolumes(ctx context.Context) error {
	if _, err := b.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bench-config"},
		Data: map[string]string{"app.conf": "color=blue\n", "level": "info"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := b.client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bench-creds"},
		Data: map[string][]byte{"password": []byte("hunter2"), "token": []byte("abc")}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	var bare, vols []time.Duration
	defer func() { b.mutate = nil }()
	for round := 1; round <= b.rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		for _, withVolumes := range order {
			kind := "bare"
			if withVolumes {
				kind = "volumes"
			}
			label := fmt.Sprintf("kubelet_burst30_%s_round%d", kind, round)
			progress("kubelet: 30 pods at once, %s, round %d", kind, round)
			b.mutate = volumePodMutation(withVolumes)
			pods := names(fmt.Sprintf("%s%d", kind, round), 30)
			p99, err := b.burstP99(ctx, label, pods)
			if err != nil {
				return err
			}
			if withVolumes {
				vols = append(vols, p99)
			} else {
				bare = append(bare, p99)
			}
			if _, err := b.deleteGone(ctx, label+"_delete", pods); err != nil {
				return err
			}
		}
	}
	mb, mv := median(bare), median(vols)
	figure("kubelet_burst30_bare_p99_median", ms(mb), "ms")
	figure("kubelet_burst30_volumes_p99_median", ms(mv), "ms")
	figure("kubelet_burst30_volumes_over_bare_p99", 100*(float64(mv)-float64(mb))/float64(mb), "%")
	return nil
}

// burstP99 creates the pods at once, waits until each is Ready, and prints and returns the create-to-Ready
// p99.
func (b *kubeletBench) burstP99(ctx context.Context, label string, pods []string) (time.Duration, error) {
	stopPprof := b.pprof(ctx, label)
	defer stopPprof()
	cpu0, kl0 := hostCPUTicks(), b.klCPUTicks()
	if err := b.create(ctx, pods, 0, corev1.RestartPolicyAlways, func(int) []string { return []string{"sleep", "3600"} }); err != nil {
		return 0, err
	}
	if err := b.watch.waitAll(ctx, pods, "Ready", 3*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
		return 0, fmt.Errorf("%s: %w; log tail:\n%s", label, err, b.kl.logTail(2000))
	}
	// Every process's CPU over the burst (the API server's, containerd's, the shims', runc's, the kernel's),
	// beside the kubelet's own: on two cores a burst is bound by CPU, so this is where a volume's cost shows.
	figure(label+"_host_cpu", float64(hostCPUTicks()-cpu0)/clockTicks, "s")
	figure(label+"_kubelet_cpu", float64(b.klCPUTicks()-kl0)/clockTicks, "s")
	ts := b.watch.times(pods)
	var lat []time.Duration
	for _, t := range ts {
		lat = append(lat, t.ready.Sub(t.created))
	}
	printLatencies(label, lat)
	b.printStages(label, pods, ts)
	return percentile(lat, 99), nil
}

// hostCPUTicks is the CPU time of the whole host (every state but idle and iowait), from /proc/stat.
func hostCPUTicks() uint64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var sum uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		sum += n
	}
	return sum
}

func (b *kubeletBench) klCPUTicks() uint64 {
	s, _ := readProc(b.kl.pid())
	return s.cpuTicks
}
