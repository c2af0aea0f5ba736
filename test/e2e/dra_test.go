//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/pkg/debugpage"
)

// draDriverPath is upstream's DRA test driver, built by `hack/kube-binaries.sh dra-test-driver`.
const draDriverPath = "/var/lib/nodeagent/bin/dra-test-driver"

// draDriver is the name upstream's test driver registers and publishes its devices under.
const draDriver = "test-driver.cdi.k8s.io"

// Dynamic resource allocation with upstream's DRA test driver run as a pod on the node (privileged, the
// kubelet's plugin directories as hostPaths, as DRA drivers are deployed), on both runtime backends: the
// driver registers through the plugin watcher and publishes the node's two devices as a ResourceSlice; a pod
// with a claim from a ResourceClaimTemplate gets a claim of its own, allocated and reserved at placement,
// prepared by the driver before the pod's sandbox, and its container sees the environment of the driver's
// CDI device; a third claim finds no device (Pending, upstream's message); a claim whose parameters the
// driver refuses keeps its pod waiting with the driver's message while the node stays Ready; a restarted
// kubelet keeps the running container and its claim; a deleted pod's claim is unprepared (the CDI spec
// removed), deallocated and deleted, and the waiting pod gets the device.
func TestDRA(t *testing.T) {
	parallel(t)
	if _, err := os.Stat(draDriverPath); err != nil {
		t.Fatalf("upstream's DRA test driver: %v (build it with hack/kube-binaries.sh dra-test-driver)", err)
	}
	// Device health in the pod's status (ResourceHealthStatus, alpha, off by default as upstream).
	cfg := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"featureGates: {ResourceHealthStatus: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			// The driver reads the admin kubeconfig once: the restarted kubelet's API server keeps its port.
			testDRA(t, startNode(t, append(append([]string(nil), rt.args...), "--apiserver-port", fmt.Sprint(freePort(t)), "--config", cfg)...), true)
		})
	}
}

// The same on upstream's control plane: kube-apiserver, kube-controller-manager's ResourceClaim controller
// making the pods' claims from their templates (and deleting them after the pods), kube-scheduler's DRA
// plugin allocating and reserving them, with upstream's DRA test driver on our node. Then a pod with a claim
// force-deleted while the kubelet is down.
func TestDRAUpstreamControlPlane(t *testing.T) {
	parallel(t)
	if _, err := os.Stat(draDriverPath); err != nil {
		t.Fatalf("upstream's DRA test driver: %v (build it with hack/kube-binaries.sh dra-test-driver)", err)
	}
	cp := privateControlPlane(t, "e2e-dra-node")
	// Without device health: kube-apiserver drops allocatedResourcesStatus while its ResourceHealthStatus
	// gate (alpha) is off, as it is by default.
	n := startNodeOn(t, cp)
	testDRA(t, n, false)

	// A pod force-deleted while the kubelet is down (the API server stays up): the restarted kubelet, once
	// it has the API's pods, unprepares the gone pod's claim (the driver removes its CDI spec) and forgets it.
	ctx := context.Background()
	third, err := n.client.CoreV1().Pods("default").Get(ctx, "third", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := podClaim(t, n, third)
	cdiFile := fmt.Sprintf("/var/run/cdi/%s-%s-gpu.json", draDriver, claim.UID)
	if _, err := os.Stat(cdiFile); err != nil {
		t.Fatalf("the running pod's CDI spec: %v", err)
	}
	n.stop()
	if err := n.client.CoreV1().Pods("default").Delete(ctx, "third", metav1.DeleteOptions{GracePeriodSeconds: ptrInt64(0)}); err != nil {
		t.Fatal(err)
	}
	n.start()
	eventually(t, 60*time.Second, "the force-deleted pod's claim unprepared", func() error {
		if _, err := os.Stat(cdiFile); !os.IsNotExist(err) {
			return fmt.Errorf("its CDI spec is still there: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(n.dir, "root", "dra_manager_state")); err != nil || strings.Contains(string(b), string(claim.UID)) {
			return fmt.Errorf("the checkpoint still names its claim: %v", err)
		}
		return nil
	})
	eventually(t, 30*time.Second, "the force-deleted pod's sandbox and container removed", func() error {
		if view := n.runtimeView(t); len(view.sandboxes["third"]) != 0 || len(view.containers["third"]) != 0 {
			return fmt.Errorf("sandboxes %v containers %v", view.sandboxes["third"], view.containers["third"])
		}
		return nil
	})
}

// testDRA runs the checks of TestDRA on n; health says whether the node reports device health in the pods'
// status (its ResourceHealthStatus gate).
func testDRA(t *testing.T, n *node, health bool) {
	ctx := context.Background()
	startDRADriver(t, n, "first", "second", "third", "refused")

	n.createPod(draClaimPod("first", "gpu"))
	first := n.waitPod("first", 90*time.Second, "the pod with a claim ready", ready)
	claim := podClaim(t, n, first)
	if !strings.HasPrefix(claim.Name, "first-gpu-") || claim.Status.Allocation == nil || len(claim.Status.ReservedFor) != 1 ||
		claim.Status.ReservedFor[0].UID != first.UID || len(claim.OwnerReferences) != 1 || claim.OwnerReferences[0].UID != first.UID {
		t.Errorf("the pod's claim: %s allocation %+v reservedFor %+v owners %+v", claim.Name, claim.Status.Allocation, claim.Status.ReservedFor, claim.OwnerReferences)
	}
	envName := "claim_" + strings.NewReplacer("-", "_", ".", "_").Replace(claim.Name) + "_gpu=true"
	if out := n.podLogs(t, "first", "main"); !strings.Contains(out, envName) || !strings.Contains(out, "user_color=blue") {
		t.Errorf("the container lacks the CDI device's environment (%s, user_color=blue):\n%s", envName, out)
	}
	cdiFile := fmt.Sprintf("/var/run/cdi/%s-%s-gpu.json", draDriver, claim.UID)
	if _, err := os.Stat(cdiFile); err != nil {
		t.Errorf("the driver's CDI spec: %v", err)
	}
	// The driver serves the health service but reports no device: the device is listed, health Unknown.
	wantID := fmt.Sprintf("%s/test=claim-%s-gpu", draDriver, claim.UID)
	n.waitPod("first", 30*time.Second, "the claim's device in allocatedResourcesStatus", func(p *v1.Pod) error {
		if !health {
			return nil
		}
		for _, cs := range p.Status.ContainerStatuses {
			for _, rs := range cs.AllocatedResourcesStatus {
				for _, r := range rs.Resources {
					if rs.Name == "claim:gpu" && string(r.ResourceID) == wantID && r.Health == v1.ResourceHealthStatusUnknown {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
	})
	if b, err := os.ReadFile(filepath.Join(n.dir, "root", "dra_manager_state")); err != nil || !strings.Contains(string(b), string(claim.UID)) {
		t.Errorf("the kubelet's checkpoint does not name the claim: %v\n%s", err, b)
	}

	// The driver refuses the claim's parameters: the pod waits with its message, the node stays Ready.
	n.createPod(draClaimPod("refused", "bad-params"))
	eventually(t, 60*time.Second, "the driver's refusal as an event", func() error {
		for _, e := range n.events(t, "refused") {
			if e.Reason == "FailedPrepareDynamicResources" && strings.Contains(e.Message, "cannot unmarshal number") {
				return nil
			}
		}
		return fmt.Errorf("events %v", eventReasons(n.events(t, "refused")))
	})
	if nd, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err != nil || nodeReady(nd) != nil {
		t.Errorf("the node is not Ready while a driver refuses a claim: %v", err)
	}
	if page, err := n.debugPods(); err != nil || !debugWaitingFor(page.Pods, "refused", "cannot unmarshal number") {
		t.Errorf("the debug page does not say what the pod waits for: %v", err)
	}
	n.deletePodAndWait(t, "refused") // its claim deallocated: the device is free again

	n.createPod(draClaimPod("second", "gpu"))
	n.waitPod("second", 90*time.Second, "a second pod with a claim ready", ready)
	n.createPod(draClaimPod("third", "gpu"))
	n.waitPod("third", 30*time.Second, "Pending: both devices allocated", pending("third", "cannot allocate all claims"))

	// A restarted kubelet keeps the container and its prepared claim.
	n.restart()
	after := n.waitPod("first", 60*time.Second, "the pod with a claim ready after the restart", ready)
	waitSlice(t, n) // wiped by the restarted kubelet, published again by the driver
	if b, a := first.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]; a.ContainerID != b.ContainerID || a.RestartCount != 0 {
		t.Errorf("the container changed across a kubelet restart: %s -> %s, restarts %d", b.ContainerID, a.ContainerID, a.RestartCount)
	}

	// The pod deleted: its claim is unprepared, deallocated and deleted; the waiting pod gets the device.
	n.deletePodAndWait(t, "first")
	eventually(t, 60*time.Second, "the deleted pod's claim gone", func() error {
		_, err := n.client.ResourceV1().ResourceClaims("default").Get(ctx, claim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("claim still there: %v", err)
	})
	if _, err := os.Stat(cdiFile); !os.IsNotExist(err) {
		t.Errorf("the deleted pod's CDI spec is still there: %v", err)
	}
	n.waitPod("third", 90*time.Second, "the waiting pod ready once a device is free", ready)
	if b, err := os.ReadFile(filepath.Join(n.dir, "root", "dra_manager_state")); err != nil || strings.Contains(string(b), string(claim.UID)) {
		t.Errorf("the kubelet's checkpoint still names the deleted pod's claim: %v\n%s", err, b)
	}
}

// startDRADriver creates the DRA objects and the driver's pod with two devices and waits for its slice. When
// the test ends, the pods named (those with claims) go before the driver: without it their claims cannot be
// unprepared, and they stay terminating (as on upstream's kubelet) until it comes back; a failed test logs the
// driver's log.
func startDRADriver(t *testing.T, n *node, pods ...string) {
	t.Helper()
	ctx := context.Background()
	draObjects(t, n)
	n.createPod(draDriverPod(n, 2))
	t.Cleanup(func() {
		for _, name := range pods {
			_ = n.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
		}
		eventually(t, 60*time.Second, "the pods with claims gone", func() error {
			l, err := n.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) > 1 {
				return fmt.Errorf("%d pods left: %v", len(l.Items), err)
			}
			return nil
		})
		if t.Failed() {
			b, err := n.client.CoreV1().Pods("default").GetLogs("dra-driver", &v1.PodLogOptions{TailLines: ptrInt64(40)}).Do(ctx).Raw()
			t.Logf("the DRA driver's log (%v):\n%s", err, b)
		}
	})
	waitSlice(t, n)
}

// waitSlice waits until the driver's ResourceSlice for the node lists its two devices.
func waitSlice(t *testing.T, n *node) {
	t.Helper()
	eventually(t, 60*time.Second, "the driver's ResourceSlice for the node", func() error {
		l, err := n.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.name})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 || l.Items[0].Spec.Driver != draDriver || len(l.Items[0].Spec.Devices) != 2 {
			return fmt.Errorf("slices %+v", l.Items)
		}
		return nil
	})
}

// draObjects creates the DeviceClass of the test driver's devices and two claim templates: "gpu" (with
// parameters the driver puts in the container's environment) and "bad-params" (parameters it refuses).
func draObjects(t *testing.T, n *node) {
	t.Helper()
	ctx := context.Background()
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "test-devices"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", draDriver)}}}}}
	if _, err := n.client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DeviceClass: %v", err)
	}
	for name, params := range map[string]string{"gpu": `{"color":"blue"}`, "bad-params": `{"color":1}`} {
		tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "test-devices"}}},
				Config: []resourcev1.DeviceClaimConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{
					Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: draDriver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}},
			}}}}
		if _, err := n.client.ResourceV1().ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ResourceClaimTemplate %s: %v", name, err)
		}
	}
}

// draDriverPod runs upstream's DRA test driver for the node with devices devices. The kubelet's plugin
// directories are mounted at the paths the kubelet sees, since the driver registers its socket's path.
func draDriverPod(n *node, devices int) *v1.Pod {
	registry, plugins := filepath.Join(n.dir, "root", "plugins_registry"), filepath.Join(n.dir, "root", "plugins")
	p := busyboxPod("dra-driver", "/plugin/"+filepath.Base(draDriverPath), "--kubeconfig", "/kubeconfig", "-v", "5",
		"kubelet-plugin", "--node-name", n.name, "--num-devices", fmt.Sprint(devices),
		"--plugin-registration-path", registry, "--datadir", plugins, "--cdi-dir", "/var/run/cdi")
	p.Spec.NodeName = n.name
	p.Spec.HostNetwork = true // the admin kubeconfig names the API server on the host's loopback
	privileged := true
	p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &privileged}
	hostPath := func(name, path, mountPath string, typ v1.HostPathType) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &typ}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: name, MountPath: mountPath})
	}
	hostPath("registry", registry, registry, v1.HostPathDirectoryOrCreate)
	// The driver's socket directory, <datadir>/<driver>, as upstream's deployment mounts it (the driver itself
	// creates only its parent).
	hostPath("plugins", filepath.Join(plugins, draDriver), filepath.Join(plugins, draDriver), v1.HostPathDirectoryOrCreate)
	hostPath("binary", filepath.Dir(draDriverPath), "/plugin", v1.HostPathDirectory)
	hostPath("cdi", "/var/run/cdi", "/var/run/cdi", v1.HostPathDirectoryOrCreate)
	hostPath("kubeconfig", n.kubeconfig(), "/kubeconfig", v1.HostPathFile)
	return p
}

// draClaimPod is a pod, placed by the API server, whose container uses a claim made from the template and
// prints the environment the claim's CDI device gives it.
func draClaimPod(name, template string) *v1.Pod {
	p := busyboxPod(name, "sh", "-c", `env | grep -E '^(claim|user)_' | sort; exec sleep 3600`)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return p
}

// podClaim returns the claim made for the pod's "gpu" claim, as its status names it.
func podClaim(t *testing.T, n *node, pod *v1.Pod) *resourcev1.ResourceClaim {
	t.Helper()
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == "gpu" && s.ResourceClaimName != nil {
			c, err := n.client.ResourceV1().ResourceClaims(pod.Namespace).Get(context.Background(), *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the pod's claim: %v", err)
			}
			return c
		}
	}
	b, _ := json.Marshal(pod.Status.ResourceClaimStatuses)
	t.Fatalf("the pod's status names no claim: %s", b)
	return nil
}

func eventReasons(evs []v1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// debugWaitingFor says whether the debug page's pod name waits for something whose description has want.
func debugWaitingFor(pods []debugpage.Pod, name, want string) bool {
	for _, p := range pods {
		if p.Name == name && strings.Contains(p.WaitingFor, want) {
			return true
		}
	}
	return false
}

// The kubelet's DRA steps under faults (built-in runtime): killed right after it prepared a pod's claims, the
// restarted kubelet starts the pod with one sandbox and container and the claim still prepared; killed
// right before it unprepares a deleted pod's claims, the restarted kubelet unprepares them (the driver
// removes the CDI spec once) and forgets them. A pod naming a claim reserved for another pod is never
// prepared, with upstream's message. A hung driver makes the pod wait with the deadline's error while the
// node stays Ready and other pods start; once the driver answers again the pod runs.
func TestDRAFaults(t *testing.T) {
	parallel(t)
	if _, err := os.Stat(draDriverPath); err != nil {
		t.Fatalf("upstream's DRA test driver: %v (build it with hack/kube-binaries.sh dra-test-driver)", err)
	}
	n := startNode(t, "--apiserver-port", fmt.Sprint(freePort(t)))
	ctx := context.Background()
	startDRADriver(t, n, "killed", "intruder", "hung", "plain")
	checkpoint := filepath.Join(n.dir, "root", "dra_manager_state")

	// Killed after the claims were prepared, before the sandbox.
	n.stop()
	n.launch(failpoint.EnvVar + "=" + failpoint.AfterDRAPrepare)
	n.waitAPI()
	n.createPod(draClaimPod("killed", "gpu"))
	if !n.exited(90 * time.Second) {
		t.Fatalf("the kubelet did not die after preparing the claims; log:\n%s", n.logTail())
	}
	n.start()
	pod := n.waitPod("killed", 90*time.Second, "the pod ready after the restart", ready)
	claim := podClaim(t, n, pod)
	view := n.runtimeView(t)
	if len(view.sandboxes["killed"]) != 1 || len(view.containers["killed"]) != 1 {
		t.Errorf("after a kill after the prepare the pod runs %d sandboxes and %d containers, want 1 and 1",
			len(view.sandboxes["killed"]), len(view.containers["killed"]))
	}
	cdiFile := fmt.Sprintf("/var/run/cdi/%s-%s-gpu.json", draDriver, claim.UID)
	if b, err := os.ReadFile(checkpoint); err != nil || !strings.Contains(string(b), string(claim.UID)) {
		t.Errorf("the checkpoint does not name the prepared claim: %v\n%s", err, b)
	}

	// A pod bound by hand to the claim of another pod: never prepared.
	intruder := busyboxPod("intruder", "sleep", "3600")
	intruder.Spec.NodeName = n.name
	intruder.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}}
	intruder.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	n.createPod(intruder)
	want := fmt.Sprintf("is not allowed to use ResourceClaim %s (%s)", claim.Name, claim.UID)
	eventually(t, 60*time.Second, "the intruder refused", func() error {
		for _, e := range n.events(t, "intruder") {
			if e.Reason == "FailedPrepareDynamicResources" && strings.Contains(e.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("events %v", eventReasons(n.events(t, "intruder")))
	})
	n.deletePodAndWait(t, "intruder")

	// Killed before unpreparing a deleted pod's claims.
	n.stop()
	n.launch(failpoint.EnvVar + "=" + failpoint.BeforeDRAUnprepare)
	n.waitAPI()
	if err := n.client.CoreV1().Pods("default").Delete(ctx, "killed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if !n.exited(90 * time.Second) {
		t.Fatalf("the kubelet did not die before unpreparing the claims; log:\n%s", n.logTail())
	}
	if _, err := os.Stat(cdiFile); err != nil {
		t.Errorf("the claim was unprepared before the failpoint: %v", err)
	}
	// Restarted with driver calls timing out after 3 s, for the hung driver below.
	n.start(failpoint.EnvVar + "=" + failpoint.DRACallTimeout + "=3s")
	eventually(t, 60*time.Second, "the deleted pod's claim unprepared and forgotten", func() error {
		if _, err := os.Stat(cdiFile); !os.IsNotExist(err) {
			return fmt.Errorf("CDI spec still there: %v", err)
		}
		if b, err := os.ReadFile(checkpoint); err != nil || strings.Contains(string(b), string(claim.UID)) {
			return fmt.Errorf("checkpoint: %v %s", err, b)
		}
		_, err := n.client.CoreV1().Pods("default").Get(ctx, "killed", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the pod is still in the API: %v", err)
		}
		return nil
	})
	logs := n.podLogs(t, "dra-driver", "main")
	removed := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"CDI file removed"`) && strings.Contains(line, cdiFile) {
			removed++
		}
	}
	if removed != 1 {
		t.Errorf("the driver removed the claim's CDI spec %d times, want once", removed)
	}

	// A hung driver: the call times out, the pod waits, the node stays Ready, other pods start.
	waitSlice(t, n)
	pid := draDriverPID(t, n)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	n.createPod(draClaimPod("hung", "gpu"))
	eventually(t, 60*time.Second, "the hung driver's deadline as an event", func() error {
		for _, e := range n.events(t, "hung") {
			if e.Reason == "FailedPrepareDynamicResources" && strings.Contains(e.Message, "DeadlineExceeded") {
				return nil
			}
		}
		return fmt.Errorf("events %v", eventReasons(n.events(t, "hung")))
	})
	n.createPod(busyboxPod("plain", "sleep", "3600"))
	n.waitPod("plain", 60*time.Second, "a pod without claims ready while the driver hangs", ready)
	if nd, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err != nil || nodeReady(nd) != nil {
		t.Errorf("the node is not Ready while a driver hangs: %v", err)
	}
	resume()
	n.waitPod("hung", 90*time.Second, "the pod ready once the driver answers", ready)
}

// draDriverPID finds the host PID of the node's DRA driver by its command line, which names the node's own
// plugin registration directory.
func draDriverPID(t *testing.T, n *node) int {
	t.Helper()
	registry := filepath.Join(n.dir, "root", "plugins_registry")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), "kubelet-plugin") && strings.Contains(string(cmd), registry) {
			return pid
		}
	}
	t.Fatalf("no DRA driver process for %s", registry)
	return 0
}

// waitAPI waits until the node's API answers again after launch (a standalone node's API server keeps its
// port, so the test's client still reaches it).
func (n *node) waitAPI() {
	n.t.Helper()
	eventually(n.t, 60*time.Second, "the API answers", func() error {
		_, err := n.client.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
}
