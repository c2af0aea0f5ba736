package podsync

import (
	"context"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodeagent/kubelet/pkg/allocation"
)

// updateRecorder records the resources each UpdateContainerResources gave.
type updateRecorder struct {
	*critest.FakeRuntimeService
	mu      sync.Mutex
	updates []*runtimeapi.LinuxContainerResources
}

func (u *updateRecorder) UpdateContainerResources(ctx context.Context, id string, r *runtimeapi.ContainerResources) error {
	u.mu.Lock()
	u.updates = append(u.updates, r.GetLinux())
	u.mu.Unlock()
	return u.FakeRuntimeService.UpdateContainerResources(ctx, id, r)
}

// cgroupRecorder records the CPU limit of each pod EnsurePod was given, in millicores.
type cgroupRecorder struct {
	NoopCgroups
	mu     sync.Mutex
	limits []int64
}

func (c *cgroupRecorder) EnsurePod(_ context.Context, pod *v1.Pod) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var total int64
	for _, ctr := range pod.Spec.Containers {
		q := ctr.Resources.Limits[v1.ResourceCPU]
		total += q.MilliValue()
	}
	c.limits = append(c.limits, total)
	return "", nil
}

func resizablePod(cpuReq, cpuLim, memLim string) *v1.Pod {
	pod := newPod("u1", "web", "app")
	pod.Generation = 1
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuReq), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuLim), v1.ResourceMemory: resource.MustParse(memLim)},
	}
	return pod
}

func resized(pod *v1.Pod, cpuReq, cpuLim, memLim string) *v1.Pod {
	p := resizablePod(cpuReq, cpuLim, memLim)
	p.Spec.Containers[0].ResizePolicy = pod.Spec.Containers[0].ResizePolicy
	p.Generation = pod.Generation + 1
	return p
}

func condition(st v1.PodStatus, t v1.PodConditionType) *v1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// A running container gets a resize in place: its new CPU quota and memory limit through
// UpdateContainerResources, the pod cgroup raised before it, and the status reports it done.
func TestResizeInPlace(t *testing.T) {
	h := newHarness(t)
	rec := &updateRecorder{FakeRuntimeService: h.rt}
	cg := &cgroupRecorder{}
	h.runtime, h.cgroups = rec, cg
	h.k = h.newKubelet(t.TempDir(), t.TempDir())

	pod := resizablePod("100m", "200m", "128Mi")
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	id := h.containers(pod.UID)["app"][0].Id
	h.rec.drain()

	bigger := resized(pod, "200m", "400m", "256Mi")
	if _, err := h.sync(bigger); err != nil {
		t.Fatal(err)
	}
	if len(rec.updates) != 1 || rec.updates[0].CpuQuota != 40000 || rec.updates[0].MemoryLimitInBytes != 256<<20 ||
		rec.updates[0].CpuShares != 204 {
		t.Fatalf("updates %v, want one with quota 40000, shares 204, memory 256Mi", rec.updates)
	}
	if cur := h.containers(pod.UID)["app"]; len(cur) != 1 || cur[0].Id != id {
		t.Fatalf("the container was replaced: %v", cur)
	}
	if n := len(cg.limits); n < 2 || cg.limits[n-1] != 400 {
		t.Errorf("pod cgroup CPU limits %v, want the new 400m", cg.limits)
	}
	ev := strings.Join(h.rec.drain(), "\n")
	for _, want := range []string{"Normal ResizeStarted Pod resize started: ", "Normal ResizeCompleted Pod resize completed: ", `"generation":2`} {
		if !strings.Contains(ev, want) {
			t.Errorf("events lack %q:\n%s", want, ev)
		}
	}
	st, _ := h.k.status.PodStatus(pod.UID)
	if c := condition(st, v1.PodResizeInProgress); c != nil {
		t.Errorf("still in progress: %+v", c)
	}
	cs := st.ContainerStatuses[0]
	if q := cs.AllocatedResources[v1.ResourceCPU]; q.MilliValue() != 200 {
		t.Errorf("allocatedResources %v", cs.AllocatedResources)
	}
	if cs.Resources == nil || cs.Resources.Limits.Memory().Value() != 256<<20 {
		t.Errorf("resources %v", cs.Resources)
	}

	// Smaller again: the containers first, the pod cgroup brought down after them.
	cg.limits = nil
	smaller := resized(bigger, "100m", "100m", "256Mi")
	if _, err := h.sync(smaller); err != nil {
		t.Fatal(err)
	}
	if len(rec.updates) != 2 || rec.updates[1].CpuQuota != 10000 {
		t.Fatalf("updates %v", rec.updates)
	}
	if len(cg.limits) != 2 || cg.limits[0] != 400 || cg.limits[1] != 100 {
		t.Errorf("pod cgroup CPU limits %v, want 400m kept until the container is down, then 100m", cg.limits)
	}

	// The next sync has nothing to do.
	if _, err := h.sync(smaller); err != nil || len(rec.updates) != 2 {
		t.Fatalf("a resize applied twice: %v %v", rec.updates, err)
	}
}

// A resize beyond the node is Infeasible, one the other pods leave no room for is Deferred; neither touches
// the container, and a later sync accepts the deferred one once there is room.
func TestResizePending(t *testing.T) {
	h := newHarness(t) // the node has 2 CPUs and 4Gi
	rec := &updateRecorder{FakeRuntimeService: h.rt}
	h.runtime = rec
	h.k = h.newKubelet(t.TempDir(), t.TempDir())
	pod := resizablePod("100m", "200m", "128Mi")
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}

	huge := resized(pod, "3", "3", "128Mi")
	if _, err := h.sync(huge); err != nil {
		t.Fatal(err)
	}
	st, _ := h.k.status.PodStatus(pod.UID)
	c := condition(st, v1.PodResizePending)
	if c == nil || c.Reason != "Infeasible" || c.Message != "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000" ||
		c.ObservedGeneration != 2 {
		t.Fatalf("PodResizePending %+v", c)
	}
	if !hasEvent(h.rec.drain(), "Warning ResizeInfeasible Pod resize Infeasible: ") {
		t.Error("no ResizeInfeasible event")
	}
	if len(rec.updates) != 0 {
		t.Fatalf("an infeasible resize was applied: %v", rec.updates)
	}
	if a, _ := h.k.alloc.Allocated(pod.UID); cpuLimit(a["app"]) != 200 {
		t.Errorf("allocation changed: %v", a)
	}

	// Another pod holds 1500m: 1 CPU more for this one does not fit now.
	other := resizablePod("1500m", "1500m", "64Mi")
	other.UID, other.Name = types.UID("u2"), "other"
	h.k.workers.UpdatePod(podUpdate{typ: updateSync, pod: other})
	eventually(t, "the other pod is admitted", func() bool {
		st, ok := h.k.workers.state(other.UID)
		return ok && st == stateSyncing
	})
	deferred := resized(huge, "1", "1", "128Mi")
	if _, err := h.sync(deferred); err != nil {
		t.Fatal(err)
	}
	st, _ = h.k.status.PodStatus(pod.UID)
	if c := condition(st, v1.PodResizePending); c == nil || c.Reason != "Deferred" || !strings.Contains(c.Message, "cpu") {
		t.Fatalf("PodResizePending %+v, want Deferred", c)
	}
	if len(rec.updates) != 0 {
		t.Fatalf("a deferred resize was applied: %v", rec.updates)
	}
}

// A resource whose resizePolicy is RestartContainer restarts the container with its new resources.
func TestResizeRestartContainer(t *testing.T) {
	h := newHarness(t)
	pod := resizablePod("100m", "200m", "128Mi")
	pod.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	old := h.containers(pod.UID)["app"][0].Id
	h.rec.drain()
	if _, err := h.sync(resized(pod, "100m", "200m", "256Mi")); err != nil {
		t.Fatal(err)
	}
	cur := h.containers(pod.UID)["app"]
	if len(cur) != 2 || cur[0].Id == old || cur[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("containers %v, want a new one running", cur)
	}
	if !hasEvent(h.rec.drain(), "Normal Killing Container app resize requires restart") {
		t.Error("no Killing event saying why")
	}
	if act, _ := h.k.alloc.Actuated(pod.UID, "app"); act.Limits.Memory().Value() != 256<<20 {
		t.Errorf("actuated %v", act)
	}
	// The sync that restarted it began with the old container running: its status must not show that one
	// with the new resources and the resize done. The next sync, with the new container, completes it.
	st, _ := h.k.status.PodStatus(pod.UID)
	if cs := st.ContainerStatuses[0]; condition(st, v1.PodResizeInProgress) == nil && strings.HasSuffix(cs.ContainerID, old) {
		t.Fatalf("status shows the old container %s with the resize done", cs.ContainerID)
	}
	if _, err := h.sync(resized(pod, "100m", "200m", "256Mi")); err != nil {
		t.Fatal(err)
	}
	st, _ = h.k.status.PodStatus(pod.UID)
	if c := condition(st, v1.PodResizeInProgress); c != nil || strings.HasSuffix(st.ContainerStatuses[0].ContainerID, old) {
		t.Fatalf("after the next sync: in progress %+v, container %s", c, st.ContainerStatuses[0].ContainerID)
	}
	if res := st.ContainerStatuses[0].Resources; res == nil || res.Limits.Memory().Value() != 256<<20 {
		t.Errorf("resources %v", res)
	}
}

// The checkpoint keeps allocations and actuated resources across a restart; a corrupt one is an error
// with an empty store.
func TestAllocationCheckpoint(t *testing.T) {
	h := newHarness(t)
	root := t.TempDir()
	h.k = h.newKubelet(root, t.TempDir())
	pod := resizablePod("100m", "200m", "128Mi")
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	if err := h.k.alloc.Flush(); err != nil {
		t.Fatal(err)
	}
	s, err := allocation.Open(root + "/" + allocation.CheckpointName)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := s.Allocated(pod.UID); !ok || cpuLimit(a["app"]) != 200 {
		t.Fatalf("allocation after reopen: %v %v", a, ok)
	}
	if r, ok := s.Actuated(pod.UID, "app"); !ok || r.Limits.Memory().Value() != 128<<20 {
		t.Fatalf("actuated after reopen: %v %v", r, ok)
	}
}

func cpuLimit(r v1.ResourceRequirements) int64 {
	q := r.Limits[v1.ResourceCPU]
	return q.MilliValue()
}

// A sidecar whose resize policy asks for a restart is resized in place (only app containers are restarted
// for a resize here), never left behind.
func TestResizeSidecarInPlace(t *testing.T) {
	h := newHarness(t)
	rec := &updateRecorder{FakeRuntimeService: h.rt}
	h.runtime = rec
	h.k = h.newKubelet(t.TempDir(), t.TempDir())
	always := v1.ContainerRestartPolicyAlways
	side := func(memLim string) *v1.Pod {
		p := resizablePod("100m", "200m", "128Mi")
		p.Spec.InitContainers = []v1.Container{{Name: "side", Image: "busybox:1.35", RestartPolicy: &always,
			ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse(memLim)},
				Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}},
			ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}}}
		return p
	}
	pod := side("64Mi")
	for i := 0; i < 3; i++ { // the sidecar, then the app container
		if _, err := h.sync(pod); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.containers(pod.UID)["side"]) != 1 || len(h.containers(pod.UID)["app"]) != 1 {
		t.Fatalf("containers %v", h.containers(pod.UID))
	}
	bigger := side("96Mi")
	bigger.Generation = 2
	if _, err := h.sync(bigger); err != nil {
		t.Fatal(err)
	}
	if len(rec.updates) != 1 || rec.updates[0].MemoryLimitInBytes != 96<<20 {
		t.Fatalf("updates %v, want the sidecar's 96Mi in place", rec.updates)
	}
	if len(h.containers(pod.UID)["side"]) != 1 {
		t.Errorf("the sidecar was restarted: %v", h.containers(pod.UID)["side"])
	}
	st, _ := h.k.status.PodStatus(pod.UID)
	if c := condition(st, v1.PodResizeInProgress); c != nil {
		t.Errorf("still in progress: %+v", c)
	}
}

func TestMemoryDecrease(t *testing.T) {
	for _, tc := range []struct {
		from, to int64
		want     bool
	}{
		{256, 128, true}, {0, 128, true}, {128, 256, false}, {128, 128, false}, {128, 0, false}, {0, 0, false},
	} {
		if got := memoryDecrease(tc.from, tc.to); got != tc.want {
			t.Errorf("memoryDecrease(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

// A memory limit lowered below what the container uses is not passed to the runtime: the resize stays in
// progress with upstream's Error reason and a message with the limit and the usage; once the usage is below
// the new limit, the next sync applies it.
func TestResizeMemoryBelowUsage(t *testing.T) {
	h := newHarness(t)
	rec := &updateRecorder{FakeRuntimeService: h.rt}
	h.runtime = rec
	h.k = h.newKubelet(t.TempDir(), t.TempDir())
	pod := resizablePod("100m", "200m", "256Mi")
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	id := h.containers(pod.UID)["app"][0].Id
	usage := func(b uint64) {
		h.rt.Lock()
		h.rt.FakeContainerStats[id] = &runtimeapi.ContainerStats{Memory: &runtimeapi.MemoryUsage{WorkingSetBytes: &runtimeapi.UInt64Value{Value: b}}}
		h.rt.Unlock()
	}
	usage(200 << 20)
	smaller := resized(pod, "100m", "200m", "128Mi")
	if _, err := h.sync(smaller); err != nil {
		t.Fatal(err)
	}
	if len(rec.updates) != 0 {
		t.Fatalf("the runtime was given the lower limit: %v", rec.updates)
	}
	st, _ := h.k.status.PodStatus(pod.UID)
	want := `container "app": memory limit (134217728) below current usage (209715200)`
	if c := condition(st, v1.PodResizeInProgress); c == nil || c.Reason != v1.PodReasonError || !strings.Contains(c.Message, want) {
		t.Fatalf("PodResizeInProgress %+v, want reason Error with %q", c, want)
	}

	usage(100 << 20)
	if _, err := h.sync(smaller); err != nil {
		t.Fatal(err)
	}
	if len(rec.updates) != 1 || rec.updates[0].MemoryLimitInBytes != 128<<20 {
		t.Fatalf("updates %v, want the 128Mi limit once the usage is below it", rec.updates)
	}
	st, _ = h.k.status.PodStatus(pod.UID)
	if c := condition(st, v1.PodResizeInProgress); c != nil {
		t.Errorf("still in progress: %+v", c)
	}
}
