//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

func ready(p *v1.Pod) error {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("phase %s, not Ready: %+v", p.Status.Phase, p.Status.ContainerStatuses)
}

// A pod created without a node is placed on the node, runs, becomes Ready with its IPs, and its logs reach
// the API.
func TestKubeletPodRunsAndBecomesReady(t *testing.T) {
	parallel(t)
	n := startNode(t)
	n.createPod(busyboxPod("ready", "sh", "-c", "echo hello-from-kubelet; exec sleep 3600"))
	pod := n.waitPod("ready", 60*time.Second, "pod Ready", ready)
	if pod.Spec.NodeName != n.name {
		t.Errorf("placed on %q, want %q", pod.Spec.NodeName, n.name)
	}
	if pod.Status.PodIP == "" || pod.Status.HostIP == "" || pod.Status.StartTime == nil {
		t.Errorf("podIP %q hostIP %q startTime %v", pod.Status.PodIP, pod.Status.HostIP, pod.Status.StartTime)
	}
	cs := pod.Status.ContainerStatuses[0]
	node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runtimeName, _, _ := strings.Cut(node.Status.NodeInfo.ContainerRuntimeVersion, "://")
	if runtimeName != "nodeagent" || !strings.HasPrefix(cs.ContainerID, runtimeName+"://") || cs.ImageID == "" || cs.State.Running == nil {
		t.Errorf("container status %+v", cs)
	}
	// The start's events reach the API (their writes wait while pods start, 5 s at most).
	eventually(t, 10*time.Second, "Pulled, Created and Started events", func() error {
		evs, err := n.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=ready,involvedObject.kind=Pod"})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if e.Source.Component == "kubelet" && e.InvolvedObject.UID == pod.UID {
				seen[e.Reason] = true
			}
		}
		for _, r := range []string{"Pulled", "Created", "Started"} {
			if !seen[r] {
				return fmt.Errorf("no %s event among %v", r, seen)
			}
		}
		return nil
	})
	eventually(t, 20*time.Second, "logs through the API", func() error {
		b, err := n.client.CoreV1().Pods("default").GetLogs("ready", &v1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(b)) != "hello-from-kubelet" {
			return fmt.Errorf("logs %q", b)
		}
		return nil
	})
}

// A crashing container is restarted with growing delays and shows CrashLoopBackOff.
func TestKubeletCrashLoopBackOff(t *testing.T) {
	parallel(t)
	n := startNode(t)
	n.createPod(busyboxPod("crasher", "sh", "-c", "exit 1"))
	seen := map[int32]time.Time{}
	sawBackOff := false
	deadline := time.Now().Add(70 * time.Second)
	for time.Now().Before(deadline) && len(seen) < 4 {
		p, err := n.client.CoreV1().Pods("default").Get(context.Background(), "crasher", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Status.ContainerStatuses) == 1 {
			cs := p.Status.ContainerStatuses[0]
			if _, ok := seen[cs.RestartCount]; !ok {
				seen[cs.RestartCount] = time.Now()
			}
			if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				sawBackOff = true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !sawBackOff {
		t.Errorf("never saw CrashLoopBackOff")
	}
	if len(seen) < 4 {
		t.Fatalf("restart counts seen: %v, want 0..3 within 70s", seen)
	}
	gap12, gap23 := seen[2].Sub(seen[1]), seen[3].Sub(seen[2])
	t.Logf("restart 1->2 after %v, 2->3 after %v", gap12, gap23)
	if gap12 < 8*time.Second || gap23 < gap12+5*time.Second {
		t.Errorf("back-off did not grow as 10s then 20s: %v then %v", gap12, gap23)
	}
}

// crashLoopBackOff.maxContainerRestartPeriod (KubeletCrashLoopBackOffMax, on in 1.35) caps the back-off: with
// a 2 s ceiling a crashing container restarts every 2 s or so, where upstream's default gives it 10 s, then 20.
func TestKubeletCrashLoopBackOffCeiling(t *testing.T) {
	parallel(t)
	cfg := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"crashLoopBackOff:\n  maxContainerRestartPeriod: 2s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "--config", cfg)
	n.createPod(busyboxPod("crasher", "sh", "-c", "exit 1"))
	start := time.Now()
	p := n.waitPod("crasher", 60*time.Second, "five restarts", func(p *v1.Pod) error {
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount < 5 {
			return fmt.Errorf("restarts so far: %+v", p.Status.ContainerStatuses)
		}
		return nil
	})
	// Five restarts take 10+20+40+80+160 s with the default ceiling.
	t.Logf("5 restarts in %v (restart count %d)", time.Since(start).Round(time.Second), p.Status.ContainerStatuses[0].RestartCount)
}

// A missing image gives ErrImagePull, then ImagePullBackOff.
func TestKubeletMissingImage(t *testing.T) {
	parallel(t)
	n := startNode(t)
	pod := busyboxPod("noimage", "true")
	pod.Spec.Containers[0].Image = "localhost/no-such-image:1"
	n.createPod(pod)
	reasons := map[string]bool{}
	n.waitPod("noimage", 60*time.Second, "ErrImagePull then ImagePullBackOff", func(p *v1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				reasons[cs.State.Waiting.Reason] = true
			}
		}
		if reasons["ErrImagePull"] && reasons["ImagePullBackOff"] {
			return nil
		}
		return fmt.Errorf("reasons so far %v", reasons)
	})
}

// A failing init container keeps the app container from starting.
func TestKubeletInitContainerFailureBlocksApp(t *testing.T) {
	parallel(t)
	n := startNode(t)
	pod := busyboxPod("initfail", "sh", "-c", "echo app-ran; sleep 3600")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: busyboxImage, Command: []string{"sh", "-c", "exit 3"}}}
	n.createPod(pod)
	p := n.waitPod("initfail", 60*time.Second, "pod Failed", func(p *v1.Pod) error {
		if p.Status.Phase != v1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if len(p.Status.InitContainerStatuses) != 1 || p.Status.InitContainerStatuses[0].State.Terminated == nil ||
		p.Status.InitContainerStatuses[0].State.Terminated.ExitCode != 3 {
		t.Errorf("init status %+v", p.Status.InitContainerStatuses)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.RestartCount != 0 {
			t.Errorf("app container ran: %+v", cs)
		}
	}
}

// A container that allocates past its memory limit is reported OOMKilled.
func TestKubeletOOMKilled(t *testing.T) {
	parallel(t)
	n := startNode(t)
	pod := busyboxPod("oom", "sh", "-c", "dd if=/dev/zero of=/dev/null bs=256M count=1")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}
	n.createPod(pod)
	p := n.waitPod("oom", 60*time.Second, "container terminated", func(p *v1.Pod) error {
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			return fmt.Errorf("not terminated yet")
		}
		return nil
	})
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Errorf("terminated %q exit %d, want OOMKilled 137", term.Reason, term.ExitCode)
	}
	if p.Status.Phase != v1.PodFailed {
		t.Errorf("phase %s, want Failed", p.Status.Phase)
	}
}

// A deleted pod is gone from the API after its grace period and leaves no sandbox, container, cgroup,
// network namespace or IP reservation. The checks name the pod's own (its UID, its sandbox), so that pods of
// tests running beside it do not count.
func TestKubeletDeletedPodLeavesNothing(t *testing.T) {
	parallel(t)
	n := startNode(t)
	n.createPod(busyboxPod("doomed", "sleep", "3600"))
	pod := n.waitPod("doomed", 60*time.Second, "pod Ready", ready)
	rt, _, err := remote.Connect(n.criSocket(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	byUID := map[string]string{"io.kubernetes.pod.uid": string(pod.UID)}
	sbs, err := rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: byUID})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("the pod's sandboxes: %v %v", sbs, err)
	}
	sandbox := sbs[0].Id
	// The built-in runtime names the sandbox's network namespace after it; the IP reservation holds its ID.
	netnsPath := cni.NetnsPath("nodeagent-" + sandbox[:16])
	if _, err := os.Stat(netnsPath); err != nil {
		t.Fatalf("the pod's network namespace: %v", err)
	}
	if ips := reservationsOf(sandbox); len(ips) != 1 {
		t.Fatalf("the pod's IP reservations: %v", ips)
	}
	if err := n.client.CoreV1().Pods("default").Delete(context.Background(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "pod gone from the API", func() error {
		_, err := n.client.CoreV1().Pods("default").Get(context.Background(), "doomed", metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	eventually(t, 10*time.Second, "no sandbox or container of the pod", func() error {
		sbs, err := rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: byUID})
		if err != nil {
			return err
		}
		ctrs, err := rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: byUID})
		if err != nil {
			return err
		}
		if len(sbs)+len(ctrs) > 0 {
			return fmt.Errorf("%d sandboxes and %d containers left", len(sbs), len(ctrs))
		}
		// Under the node's cgroup root, which is the host's or a slot's.
		var dirs []string
		for _, pattern := range []string{"/sys/fs/cgroup/*/kubepods/pod", "/sys/fs/cgroup/*/kubepods/*/pod",
			"/sys/fs/cgroup/*/*/kubepods/pod", "/sys/fs/cgroup/*/*/kubepods/*/pod"} {
			found, _ := filepath.Glob(pattern + string(pod.UID))
			dirs = append(dirs, found...)
		}
		if len(dirs) > 0 {
			return fmt.Errorf("cgroups left: %v", dirs)
		}
		if _, err := os.Stat(netnsPath); !os.IsNotExist(err) {
			return fmt.Errorf("network namespace %s left (%v)", netnsPath, err)
		}
		if ips := reservationsOf(sandbox); len(ips) > 0 {
			return fmt.Errorf("IP reservations left: %v", ips)
		}
		return nil
	})
}

// reservationsOf returns the addresses the CNI network's host-local IPAM holds for the sandbox (a
// reservation file is named after the address and starts with the container ID).
func reservationsOf(sandbox string) []string {
	var ips []string
	files, _ := os.ReadDir(filepath.Join("/var/lib/cni/networks", cniNetwork))
	for _, f := range files {
		if b, err := os.ReadFile(filepath.Join("/var/lib/cni/networks", cniNetwork, f.Name())); err == nil &&
			strings.HasPrefix(string(b), sandbox) {
			ips = append(ips, f.Name())
		}
	}
	return ips
}

// A restarted kubelet adopts its running pods: no container is restarted.
func TestKubeletRestartRestartsNoContainer(t *testing.T) {
	parallel(t)
	n := startNode(t)
	n.createPod(busyboxPod("survivor", "sleep", "3600"))
	before := n.waitPod("survivor", 60*time.Second, "pod Ready", ready)
	n.restart()
	time.Sleep(5 * time.Second) // several syncs and relists
	after := n.waitPod("survivor", 30*time.Second, "pod Ready again", ready)
	b, a := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if a.ContainerID != b.ContainerID || a.RestartCount != 0 || !a.State.Running.StartedAt.Equal(&b.State.Running.StartedAt) {
		t.Errorf("container changed across a kubelet restart: before %s started %v, after %s started %v restarts %d",
			b.ContainerID, b.State.Running.StartedAt, a.ContainerID, a.State.Running.StartedAt, a.RestartCount)
	}
}

// A static pod from the manifest directory runs and appears in the API as a mirror pod.
func TestKubeletStaticPod(t *testing.T) {
	parallel(t)
	n := startNode(t)
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: static-web
  namespace: default
spec:
  containers:
  - name: web
    image: %s
    command: ["sleep", "3600"]
`, busyboxImage)
	if err := os.WriteFile(filepath.Join(n.dir, "manifests", "web.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	mirrorName := "static-web-" + n.name
	p := n.waitPod(mirrorName, 60*time.Second, "mirror pod Running", func(p *v1.Pod) error {
		if p.Status.Phase != v1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if _, ok := p.Annotations["kubernetes.io/config.mirror"]; !ok {
		t.Errorf("mirror pod lacks the kubernetes.io/config.mirror annotation: %v", p.Annotations)
	}
	if err := os.Remove(filepath.Join(n.dir, "manifests", "web.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "mirror pod removed with its manifest", func() error {
		_, err := n.client.CoreV1().Pods("default").Get(context.Background(), mirrorName, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if err := n.waitRuntimeEmpty(60*time.Second, map[string]string{"io.kubernetes.pod.name": mirrorName}); err != nil {
		t.Errorf("static pod not stopped with its manifest removed: %v", err)
	}
}
