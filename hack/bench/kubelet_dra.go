package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Upstream's DRA test driver (built by `hack/kube-binaries.sh dra-test-driver`), run as a pod on the node as
// test/e2e/dra_test.go runs it, with devices enough for every pod the phase starts.
const (
	benchDRADriverPath = "/var/lib/nodeagent/bin/dra-test-driver"
	benchDRADriver     = "test-driver.cdi.k8s.io"
	benchDRADevices    = 120
	benchDRAPod        = "dra-driver"
	benchDRATemplate   = "bench-gpu"
	// benchDRAMemoryPods pods with claims, beside the driver's pod: 110 pods on the node, its --max-pods.
	benchDRAMemoryPods = 109
)

// startBenchDRADriver creates the DeviceClass of the test driver's devices and a claim template (with the
// opaque parameters the driver turns into the container's environment), starts the driver's pod and waits
// until its ResourceSlice lists every device. kubeletDir is the node's directory (root/, admin.kubeconfig).
func (b *kubeletBench) startBenchDRADriver(ctx context.Context, kubeletDir string) error {
	if _, err := os.Stat(benchDRADriverPath); err != nil {
		return fmt.Errorf("upstream's DRA test driver: %w (build it with hack/kube-binaries.sh dra-test-driver)", err)
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "bench-devices"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", benchDRADriver)}}}}}
	if _, err := b.client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return err
	}
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: benchDRATemplate, Namespace: "default"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}},
			Config: []resourcev1.DeviceClaimConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: benchDRADriver, Parameters: runtime.RawExtension{Raw: []byte(`{"color":"blue"}`)}}}}},
		}}}}
	if _, err := b.client.ResourceV1().ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := b.client.CoreV1().Pods("default").Create(ctx, benchDRADriverPod(kubeletDir), metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := b.watch.waitAll(ctx, []string{benchDRAPod}, "Ready", 2*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
		return fmt.Errorf("the DRA driver's pod: %w; log tail:\n%s", err, b.kl.logTail(2000))
	}
	b.keepShims = len(shimPIDs(kubeletNamespace))
	// The kubelet's plugin watcher registered the driver (its log at -v 2), and the driver published its devices.
	if err := waitFor(ctx, time.Minute, "the kubelet's registration of the DRA driver", func() bool {
		data, _ := os.ReadFile(b.kl.logPath)
		return strings.Contains(string(data), "Registered DRA plugin")
	}); err != nil {
		return err
	}
	return waitFor(ctx, time.Minute, "the DRA driver's ResourceSlice", func() bool {
		l, err := b.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + benchNode})
		return err == nil && len(l.Items) == 1 && l.Items[0].Spec.Driver == benchDRADriver && len(l.Items[0].Spec.Devices) == benchDRADevices
	})
}

// benchDRADriverPod is test/e2e's draDriverPod for the bench's node: privileged, host network (the admin
// kubeconfig names the API server on loopback), the kubelet's plugin directories at the paths the kubelet
// sees, the binary from the host. -v 2 rather than the e2e's 5: the driver's per-call logs would share the
// two cores with the burst.
func benchDRADriverPod(kubeletDir string) *corev1.Pod {
	registry, plugins := filepath.Join(kubeletDir, "root", "plugins_registry"), filepath.Join(kubeletDir, "root", "plugins")
	p := benchPodSpec(benchDRAPod, benchNode, benchDRAPod, corev1.RestartPolicyAlways,
		"/plugin/"+filepath.Base(benchDRADriverPath), "--kubeconfig", "/kubeconfig", "-v", "2",
		"kubelet-plugin", "--node-name", benchNode, "--num-devices", fmt.Sprint(benchDRADevices),
		"--plugin-registration-path", registry, "--datadir", plugins, "--cdi-dir", "/var/run/cdi")
	p.Spec.HostNetwork = true
	privileged := true
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &privileged}
	hostPath := func(name, path, mountPath string, typ corev1.HostPathType) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: name, MountPath: mountPath})
	}
	hostPath("registry", registry, registry, corev1.HostPathDirectoryOrCreate)
	hostPath("plugins", filepath.Join(plugins, benchDRADriver), filepath.Join(plugins, benchDRADriver), corev1.HostPathDirectoryOrCreate)
	hostPath("binary", filepath.Dir(benchDRADriverPath), "/plugin", corev1.HostPathDirectory)
	hostPath("cdi", "/var/run/cdi", "/var/run/cdi", corev1.HostPathDirectoryOrCreate)
	hostPath("kubeconfig", filepath.Join(kubeletDir, "admin.kubeconfig"), "/kubeconfig", corev1.HostPathFile)
	return p
}

// draMutation leaves the pod for the API server to place (both kinds, so that placement is in both) and,
// withClaim, gives its container a claim made from the bench template: the claim controller creates it, the
// placement allocates and reserves it, the kubelet has the driver prepare it before the sandbox.
func draMutation(withClaim bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeName = ""
		if withClaim {
			tmpl := benchDRATemplate
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
			p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		}
	}
}

// runDRA measures 30 pods at once each with a claim of upstream's DRA test driver beside 30 plain pods,
// both placed by the API server, alternating which goes first, for b.rounds rounds: the claim's cost on the
// way to Ready (the claim made from the template, allocated and reserved at placement, prepared by the
// driver, the checkpoint, the CDI device) is the difference of the two p99s. Then the kubelet's memory with
// 110 pods on the node: 109 plain pods, then 109 with claims, each beside the driver's pod, at 10/s.
func (b *kubeletBench) runDRA(ctx context.Context, kubeletDir string) error {
	defer func() { b.mutate = nil }()
	defer b.stopBenchDRA(ctx)
	if err := b.startBenchDRADriver(ctx, kubeletDir); err != nil {
		return err
	}
	var plain, claims []time.Duration
	for round := 1; round <= b.rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		for _, withClaim := range order {
			kind := "plain"
			if withClaim {
				kind = "dra"
			}
			b.mutate = draMutation(withClaim)
			label := fmt.Sprintf("kubelet_burst30_%s_round%d", kind, round)
			progress("kubelet: 30 pods at once, %s, round %d", kind, round)
			pods := names(fmt.Sprintf("%s%d", kind, round), 30)
			// The API server makes, allocates and reserves the claims: its CPU beside the kubelet's.
			apiPID := b.apiPID()
			api0, _ := readProc(apiPID)
			p99, err := b.burstP99(ctx, label, pods)
			if err != nil {
				return err
			}
			if api1, err := readProc(apiPID); err == nil && apiPID > 0 {
				figure(label+"_apiserver_cpu", cpuSeconds(api0, api1), "s")
			}
			b.printBound(label, pods)
			if withClaim {
				claims = append(claims, p99)
			} else {
				plain = append(plain, p99)
			}
			if err := b.deleteDRAPods(ctx, label+"_delete", pods, withClaim); err != nil {
				return err
			}
		}
	}
	mp, mc := median(plain), median(claims)
	figure("kubelet_burst30_plain_p99_median", ms(mp), "ms")
	figure("kubelet_burst30_dra_p99_median", ms(mc), "ms")
	figure("kubelet_burst30_dra_over_plain_p99", 100*(float64(mc)-float64(mp))/float64(mp), "%")

	// Memory: plain first, so that the pods with claims find the heap the plain ones grew.
	var rss [2]int64
	for i, withClaim := range []bool{false, true} {
		kind := "plain"
		if withClaim {
			kind = "dra"
		}
		b.mutate = draMutation(withClaim)
		label := fmt.Sprintf("kubelet_paced%d_%s", benchDRAMemoryPods, kind)
		progress("kubelet: %d pods at 10/s, %s", benchDRAMemoryPods, kind)
		pods := names(kind+"-mem", benchDRAMemoryPods)
		err := b.create(ctx, pods, 100*time.Millisecond, corev1.RestartPolicyAlways, func(int) []string { return []string{"sleep", "3600"} })
		if err == nil {
			err = b.watch.waitAll(ctx, pods, "Ready", 4*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() })
		}
		if err != nil {
			return fmt.Errorf("%s: %w; log tail:\n%s", label, err, b.kl.logTail(2000))
		}
		var lat []time.Duration
		for _, t := range b.watch.times(pods) {
			lat = append(lat, t.ready.Sub(t.created))
		}
		printLatencies(label+"_create_to_ready", lat)
		if err := b.idleWindow(ctx, "110pods_"+kind); err != nil {
			return err
		}
		s, err := readProc(b.kl.pid())
		if err != nil {
			return err
		}
		rss[i] = s.rssKiB
		if err := b.deleteDRAPods(ctx, label+"_delete", pods, withClaim); err != nil {
			return err
		}
	}
	figure("kubelet_rss_110pods_dra_over_plain", mib(rss[1]-rss[0]), "MiB")
	return nil
}

// printBound prints create-to-bound: the API server's placement, which for a pod with a claim waits for the
// claim controller's claim and allocates and reserves it.
func (b *kubeletBench) printBound(label string, pods []string) {
	var lat []time.Duration
	for _, t := range b.watch.times(pods) {
		if !t.bound.IsZero() {
			lat = append(lat, t.bound.Sub(t.created))
		}
	}
	printLatencies(label+"_create_to_bound", lat)
}

// deleteDRAPods deletes the pods (grace 2 s) and, for pods with claims, waits until their claims are
// unprepared, released and deleted, so that the next phase starts with every device free.
func (b *kubeletBench) deleteDRAPods(ctx context.Context, label string, pods []string, withClaim bool) error {
	t0 := time.Now()
	if _, err := b.deleteGone(ctx, label, pods); err != nil {
		return err
	}
	if !withClaim {
		return nil
	}
	if err := waitFor(ctx, 2*time.Minute, label+": the pods' claims gone", func() bool {
		l, err := b.client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	}); err != nil {
		return err
	}
	figure(label+"_claims_gone", ms(time.Since(t0)), "ms")
	return nil
}

// stopBenchDRA deletes the pods with claims before the driver's pod, which their unprepare needs, then the
// driver's pod.
func (b *kubeletBench) stopBenchDRA(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	l, err := b.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range l.Items {
			if p.Name != benchDRAPod {
				_ = b.client.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
		}
	}
	_ = waitFor(ctx, time.Minute, "the pods with claims gone", func() bool {
		l, err := b.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) <= 1
	})
	b.keepShims = 0
	_ = b.client.CoreV1().Pods("default").Delete(ctx, benchDRAPod, metav1.DeleteOptions{})
	_ = b.watch.waitAll(ctx, []string{benchDRAPod}, "gone", time.Minute, func(t *podTimes) bool { return !t.gone.IsZero() })
}
