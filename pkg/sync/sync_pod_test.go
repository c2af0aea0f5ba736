package podsync

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/status"
)

func TestSyncPodStartsSandboxAndContainers(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "a", "b")
	out, err := h.sync(pod)
	if err != nil || !out.changed {
		t.Fatalf("sync: %+v %v", out, err)
	}
	cs := h.containers(pod.UID)
	for _, name := range []string{"a", "b"} {
		if len(cs[name]) != 1 || cs[name][0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("container %s: %v", name, cs[name])
		}
		c := cs[name][0]
		if c.Labels[podfacts.LabelPodUID] != "u1" || c.Annotations[podfacts.AnnotationContainerHash] == "" || c.Annotations[podfacts.AnnotationContainerRestartCount] != "0" {
			t.Errorf("labels %v annotations %v", c.Labels, c.Annotations)
		}
	}
	ev := h.rec.drain()
	for _, want := range []string{"Normal Pulled Container image \"busybox:1.35\" already present on machine", "Normal Created Created container: a", "Normal Started Started container b"} {
		if !hasEvent(ev, want) {
			t.Errorf("missing event %q in %v", want, ev)
		}
	}
	// Log directory layout: /var/log/pods/<ns>_<name>_<uid>/<ctr>/.
	if _, err := os.Stat(filepath.Join(h.k.cfg.PodLogsDir, "ns_web_u1", "a")); err != nil {
		t.Errorf("log dir: %v", err)
	}

	// The next sync sees everything running and does nothing.
	before := len(h.rt.GetCalls())
	out, err = h.sync(pod)
	if err != nil || out.changed {
		t.Fatalf("second sync changed things: %+v %v", out, err)
	}
	for _, c := range h.rt.GetCalls()[before:] {
		if c == "CreateContainer" || c == "RunPodSandbox" || c == "StopContainer" {
			t.Fatalf("second sync called %s", c)
		}
	}
	st, _ := h.k.status.PodStatus(pod.UID)
	if st.Phase != v1.PodRunning || st.PodIP != "192.168.192.168" || st.ContainerStatuses[0].ContainerID == "" {
		t.Errorf("status %+v", st)
	}
}

func TestSyncPodRestartsOnlyOnSpecChange(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "a")
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	// A change the hash ignores (resources) restarts nothing.
	pod2 := pod.DeepCopy()
	pod2.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	if out, _ := h.sync(pod2); out.changed {
		t.Fatal("restarted on a field outside the hash")
	}
	// A real change restarts the container with the next restart count.
	pod3 := pod.DeepCopy()
	pod3.Spec.Containers[0].Args = []string{"new"}
	if _, err := h.sync(pod3); err != nil {
		t.Fatal(err)
	}
	ev := h.rec.drain()
	if !hasEvent(ev, "Killing Container a definition changed, will be restarted") {
		t.Errorf("events %v", ev)
	}
	cs := h.containers(pod.UID)["a"]
	if len(cs) != 2 || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING || cs[0].Annotations[podfacts.AnnotationContainerRestartCount] != "1" {
		t.Fatalf("containers after spec change: %v", cs)
	}
}

func TestSyncPodInitContainersInOrder(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{
		{Name: "init1", Image: "busybox:1.35"},
		{Name: "side", Image: "busybox:1.35", RestartPolicy: &always},
		{Name: "init2", Image: "busybox:1.35"},
	}
	step := func(want string) {
		t.Helper()
		if _, err := h.sync(pod); err != nil {
			t.Fatal(err)
		}
		var running []string
		for name, list := range h.containers(pod.UID) {
			if list[0].State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				running = append(running, name)
			}
		}
		if got := strings.Join(sortStrings(running), ","); got != want {
			t.Fatalf("running %q, want %q", got, want)
		}
	}
	step("init1")
	st, _ := h.k.status.PodStatus(pod.UID)
	if st.Phase != v1.PodPending || st.ContainerStatuses[0].State.Waiting.Reason != status.ReasonPodInitializing {
		t.Fatalf("status while initializing: %s %+v", st.Phase, st.ContainerStatuses[0].State)
	}
	step("init1") // still running: nothing else starts
	h.exit(h.containers(pod.UID)["init1"][0].Id, 0, t0)
	step("side")
	step("init2,side")
	h.exit(h.containers(pod.UID)["init2"][0].Id, 0, t0)
	step("app,side")
	step("app,side")
}

func TestSyncPodInitFailureNeverBlocksApp(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1.35"}}
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	h.exit(h.containers(pod.UID)["init"][0].Id, 3, t0)
	out, err := h.sync(pod)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.containers(pod.UID)["app"]; ok {
		t.Fatal("app container started after a failed init container")
	}
	st, _ := h.k.status.PodStatus(pod.UID)
	if st.Phase != v1.PodFailed || !out.terminal {
		t.Errorf("phase %s terminal %v", st.Phase, out.terminal)
	}
}

func TestSyncPodSandboxRecreated(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	st := h.state(pod.UID)
	if err := h.rt.StopPodSandbox(h.ctx, st.Sandboxes[0].Id); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	ev := h.rec.drain()
	if !hasEvent(ev, "Normal SandboxChanged Pod sandbox changed, it will be killed and re-created.") {
		t.Errorf("events %v", ev)
	}
	st = h.state(pod.UID)
	ready := 0
	for _, sb := range st.Sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
			if sb.Metadata.Attempt != 1 {
				t.Errorf("attempt %d", sb.Metadata.Attempt)
			}
		}
	}
	if ready != 1 {
		t.Fatalf("%d ready sandboxes", ready)
	}
}

func TestSyncPodSandboxFailure(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	h.rt.InjectError("RunPodSandbox", errors.New("cni: no IP left"))
	if _, err := h.sync(pod); err == nil {
		t.Fatal("sync succeeded")
	}
	if ev := h.rec.drain(); !hasEvent(ev, "Warning FailedCreatePodSandBox Failed to create pod sandbox: cni: no IP left") {
		t.Errorf("events %v", ev)
	}
	if _, err := h.sync(pod); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

func TestSyncPodImagePolicies(t *testing.T) {
	tests := []struct {
		name, image string
		policy      v1.PullPolicy
		pullErr     bool
		wantReason  string
		wantPull    bool
	}{
		{name: "present, IfNotPresent", image: "busybox:1.35", policy: v1.PullIfNotPresent},
		{name: "absent, IfNotPresent", image: "other:1", policy: v1.PullIfNotPresent, wantPull: true},
		{name: "present, Always", image: "busybox:1.35", policy: v1.PullAlways, wantPull: true},
		{name: "absent, Never", image: "other:1", policy: v1.PullNever, wantReason: status.ReasonErrImageNeverPull},
		{name: "pull fails", image: "missing:1", policy: v1.PullIfNotPresent, pullErr: true, wantPull: true, wantReason: status.ReasonErrImagePull},
		{name: "bad name", image: "UPPER/Case::x", policy: v1.PullIfNotPresent, wantReason: status.ReasonInvalidImageName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pod := newPod("u1", "web", "app")
			pod.Spec.Containers[0].Image = tc.image
			pod.Spec.Containers[0].ImagePullPolicy = tc.policy
			if tc.pullErr {
				h.img.InjectError("PullImage", errors.New("manifest unknown"))
			}
			_, _ = h.sync(pod)
			pulled := false
			for _, c := range h.img.Called {
				pulled = pulled || c == "PullImage"
			}
			if pulled != tc.wantPull {
				t.Errorf("pulled %v, want %v (calls %v)", pulled, tc.wantPull, h.img.Called)
			}
			st, _ := h.k.status.PodStatus(pod.UID)
			got := ""
			if w := st.ContainerStatuses[0].State.Waiting; w != nil && w.Reason != status.ReasonContainerCreating {
				got = w.Reason
			}
			if got != tc.wantReason {
				t.Errorf("waiting reason %q, want %q (%+v)", got, tc.wantReason, st.ContainerStatuses[0].State)
			}
		})
	}
}

func TestSyncPodImagePullBackOff(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	pod.Spec.Containers[0].Image = "missing:1"
	reason := func() string {
		st, _ := h.k.status.PodStatus(pod.UID)
		return st.ContainerStatuses[0].State.Waiting.Reason
	}
	h.img.InjectError("PullImage", errors.New("not found"))
	out, _ := h.sync(pod)
	if reason() != status.ReasonErrImagePull || out.requeue != 1e9 {
		t.Fatalf("after a failed pull: %s, requeue %v", reason(), out.requeue)
	}
	h.clock.Step(1e9)
	out, _ = h.sync(pod)
	if reason() != status.ReasonImagePullBackOff || out.requeue != 9e9 {
		t.Fatalf("during back-off: %s, requeue %v", reason(), out.requeue)
	}
	if ev := h.rec.drain(); !hasEvent(ev, `Normal BackOff Back-off pulling image "missing:1"`) {
		t.Errorf("events %v", ev)
	}
	h.clock.Step(9e9)
	h.img.InjectError("PullImage", errors.New("not found"))
	if _, _ = h.sync(pod); reason() != status.ReasonErrImagePull {
		t.Fatalf("after the back-off: %s", reason())
	}
	h.clock.Step(1e9)
	if out, _ = h.sync(pod); out.requeue != 19e9 {
		t.Fatalf("second back-off requeue %v, want 19s", out.requeue)
	}
}

func TestSyncPodEnvConfigError(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
		ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "k"}}}}
	if _, err := h.sync(pod); err == nil {
		t.Fatal("sync succeeded with a missing configmap")
	}
	st, _ := h.k.status.PodStatus(pod.UID)
	w := st.ContainerStatuses[0].State.Waiting
	if w == nil || w.Reason != status.ReasonCreateContainerConfigError || !strings.Contains(w.Message, `configmap "cfg" not found`) {
		t.Fatalf("waiting %+v", w)
	}
	// Once the configmap exists the container starts and the reason clears.
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"k": "v"}}
	if _, err := h.client.CoreV1().ConfigMaps("ns").Create(h.ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	st, _ = h.k.status.PodStatus(pod.UID)
	if st.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("state %+v", st.ContainerStatuses[0].State)
	}
}

func TestSyncPodActiveDeadline(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	d := int64(30)
	pod.Spec.ActiveDeadlineSeconds = &d
	out, err := h.sync(pod)
	if err != nil || out.requeue <= 0 || out.requeue > 30e9 {
		t.Fatalf("first sync %+v %v", out, err)
	}
	h.clock.Step(31e9)
	out, _ = h.sync(pod)
	st, _ := h.k.status.PodStatus(pod.UID)
	if !out.terminal || st.Phase != v1.PodFailed || st.Reason != status.ReasonDeadlineExceeded {
		t.Fatalf("after the deadline: %+v %s %s", out, st.Phase, st.Reason)
	}
}

func TestSyncPodRestartPolicyNeverCompletes(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "job", "app")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	h.exit(h.containers(pod.UID)["app"][0].Id, 0, t0)
	out, _ := h.sync(pod)
	st, _ := h.k.status.PodStatus(pod.UID)
	if !out.terminal || st.Phase != v1.PodSucceeded {
		t.Fatalf("%+v %s", out, st.Phase)
	}
	if n := len(h.containers(pod.UID)["app"]); n != 1 {
		t.Fatalf("container restarted: %d instances", n)
	}
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// An evicted pod's status says so, as upstream's eviction manager writes it: Failed, Evicted, the message,
// the DisruptionTarget condition, and not Ready while its containers stop.
func TestEvictedPodStatus(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	const msg = "The node was low on resource: memory."
	h.k.evictions.add(pod.UID, msg)
	out, _ := h.sync(pod)
	st, _ := h.k.status.PodStatus(pod.UID)
	if !out.terminal || st.Phase != v1.PodFailed || st.Reason != status.ReasonEvicted || st.Message != msg {
		t.Fatalf("%+v: phase %s reason %q message %q", out, st.Phase, st.Reason, st.Message)
	}
	var disruption, ready bool
	for _, c := range st.Conditions {
		disruption = disruption || c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonTerminationByKubelet && c.Message == msg
		ready = ready || c.Type == v1.PodReady && c.Status == v1.ConditionTrue
	}
	if !disruption || ready {
		t.Errorf("conditions %+v: want DisruptionTarget and not Ready", st.Conditions)
	}
	h.k.evictions.forget(pod.UID)
	if h.k.evictions.has(pod.UID) {
		t.Error("forget left the eviction")
	}
}

// Under disk pressure the dead containers and sandbox of a terminated pod go; a running pod keeps its.
func TestReclaimDeadContainers(t *testing.T) {
	h := newHarness(t)
	done := newPod("u1", "done", "app")
	done.Spec.RestartPolicy = v1.RestartPolicyNever
	running := newPod("u2", "web", "app")
	for _, p := range []*v1.Pod{done, running} {
		if _, err := h.sync(p); err != nil {
			t.Fatal(err)
		}
	}
	h.exit(h.containers(done.UID)["app"][0].Id, 0, t0)
	for _, sb := range h.state(done.UID).Sandboxes {
		if err := h.rt.StopPodSandbox(h.ctx, sb.Id); err != nil {
			t.Fatal(err)
		}
	}
	h.state(done.UID)
	h.k.workers.mu.Lock()
	h.k.workers.pods[done.UID] = &podWork{pod: done, state: stateTerminated, terminatedDone: true}
	h.k.workers.pods[running.UID] = &podWork{pod: running, state: stateSyncing}
	h.k.workers.mu.Unlock()
	n, err := h.k.ReclaimDeadContainers(h.ctx)
	if err != nil || n != 2 {
		t.Fatalf("removed %d (%v), want the terminated pod's container and sandbox", n, err)
	}
	if st := h.state(done.UID); len(st.Containers)+len(st.Sandboxes) != 0 {
		t.Errorf("left of the terminated pod: %d containers, %d sandboxes", len(st.Containers), len(st.Sandboxes))
	}
	if st := h.state(running.UID); len(st.Containers) != 1 || len(st.Sandboxes) != 1 {
		t.Errorf("the running pod lost %d containers, %d sandboxes", 1-len(st.Containers), 1-len(st.Sandboxes))
	}
}
