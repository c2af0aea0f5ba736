package podsync

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// orderRuntime records stops, hooks and sandbox stops by container name, in order.
type orderRuntime struct {
	*critest.FakeRuntimeService
	mu  sync.Mutex
	log []string
}

func (o *orderRuntime) record(s string) {
	o.mu.Lock()
	o.log = append(o.log, s)
	o.mu.Unlock()
}

func (o *orderRuntime) name(id string) string {
	o.Lock()
	defer o.Unlock()
	if c, ok := o.Containers[id]; ok {
		return c.Metadata.Name
	}
	return id
}

func (o *orderRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	o.record("stop " + o.name(id))
	return o.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

func (o *orderRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	o.record("exec " + o.name(id) + " " + strings.Join(cmd, " "))
	return o.FakeRuntimeService.ExecSync(ctx, id, cmd, timeout)
}

func (o *orderRuntime) StopPodSandbox(ctx context.Context, id string) error {
	o.record("stop sandbox")
	return o.FakeRuntimeService.StopPodSandbox(ctx, id)
}

func TestTerminationOrder(t *testing.T) {
	h := newHarness(t)
	rt := &orderRuntime{FakeRuntimeService: h.rt}
	h.k.runtime = rt
	pod := newPod("u1", "web", "a", "b")
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{
		{Name: "s1", Image: "busybox:1.35", RestartPolicy: &always},
		{Name: "s2", Image: "busybox:1.35", RestartPolicy: &always},
	}
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
	for i := 0; i < 4; i++ {
		if _, err := h.sync(pod); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(runningContainers(h.state(pod.UID))); n != 4 {
		t.Fatalf("%d containers running, want 4", n)
	}
	grace := int64(10)
	if err := h.k.syncTerminatingPod(h.ctx, pod, h.state(pod.UID), &grace); err != nil {
		t.Fatal(err)
	}
	got := rt.log
	// a's preStop hook runs before a stops; a and b stop (in parallel) before the sidecars, which stop in
	// reverse order; the sandbox stops last.
	if len(got) != 6 {
		t.Fatalf("log %v", got)
	}
	idx := func(s string) int {
		for i, g := range got {
			if g == s {
				return i
			}
		}
		t.Fatalf("%q missing from %v", s, got)
		return -1
	}
	if !(idx("exec a drain") < idx("stop a") && idx("stop a") < idx("stop s2") && idx("stop b") < idx("stop s2") &&
		idx("stop s2") < idx("stop s1") && idx("stop s1") < idx("stop sandbox")) {
		t.Fatalf("termination order %v", got)
	}
	if ev := h.rec.drain(); !hasEvent(ev, "Normal Killing Stopping container s1") {
		t.Errorf("events %v", ev)
	}
	if n := len(runningContainers(h.state(pod.UID))); n != 0 {
		t.Fatalf("%d containers still running", n)
	}
}

func TestGracePeriodOf(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	pod := newPod("u1", "p", "a")
	if g := gracePeriodOf(pod, nil, nil); g != defaultGracePeriod {
		t.Errorf("default %d", g)
	}
	pod.Spec.TerminationGracePeriodSeconds = i(60)
	if g := gracePeriodOf(pod, nil, nil); g != 60 {
		t.Errorf("spec %d", g)
	}
	pod.DeletionGracePeriodSeconds = i(5)
	if g := gracePeriodOf(pod, nil, nil); g != 5 {
		t.Errorf("deletion %d", g)
	}
	if g := gracePeriodOf(pod, i(1), nil); g != 1 {
		t.Errorf("override %d", g)
	}
}

// criStopRuntime stops containers as CRI runtimes do: a container that was created and never started is
// left as it is.
type criStopRuntime struct{ *critest.FakeRuntimeService }

func (r criStopRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.Lock()
	c, ok := r.Containers[id]
	created := ok && c.State == runtimeapi.ContainerState_CONTAINER_CREATED
	r.Unlock()
	if created {
		return nil
	}
	return r.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

// A container created and never started (a kubelet killed between create and start leaves one) does not
// keep its pod from terminating: it runs nothing, and it goes with the sandbox.
func TestTerminationWithNeverStartedContainer(t *testing.T) {
	h := newHarness(t)
	h.k.runtime = criStopRuntime{h.rt}
	pod := newPod("u1", "web", "app")
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	st := h.state(pod.UID)
	running := st.Containers[0]
	h.rt.Lock()
	labels := h.rt.Containers[running.Id].Labels
	h.rt.Unlock()
	sb := st.Sandboxes[0]
	_, err := h.rt.CreateContainer(h.ctx, sb.Id, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 1}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.35"},
		Labels: labels,
	}, &runtimeapi.PodSandboxConfig{Metadata: sb.Metadata})
	if err != nil {
		t.Fatal(err)
	}
	grace := int64(2)
	if err := h.k.syncTerminatingPod(h.ctx, pod, h.state(pod.UID), &grace); err != nil {
		t.Fatal(err)
	}
	if err := h.k.syncTerminatedPod(h.ctx, pod, h.state(pod.UID), true); err != nil {
		t.Fatalf("terminated sync with a never-started container: %v", err)
	}
}
