package podsync

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/status"
)

// fakeDRA prepares claims as the test says and records the calls.
type fakeDRA struct {
	mu         sync.Mutex
	prepareErr error
	prepared   map[types.UID]bool
	calls      []string
}

func (f *fakeDRA) Prepare(_ context.Context, pod *v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "prepare "+pod.Name)
	if f.prepareErr != nil {
		return f.prepareErr
	}
	if f.prepared == nil {
		f.prepared = map[types.UID]bool{}
	}
	f.prepared[pod.UID] = true
	return nil
}

func (f *fakeDRA) ContainerCDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error) {
	var out []string
	for _, cl := range c.Resources.Claims {
		out = append(out, "example.com/dev="+pod.Name+"-"+cl.Name)
	}
	return out, nil
}

func (f *fakeDRA) Unprepare(_ context.Context, uid types.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "unprepare "+string(uid))
	delete(f.prepared, uid)
	return nil
}

func (f *fakeDRA) Reconcile(context.Context, []types.UID) {}

func (f *fakeDRA) Holds(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prepared[uid]
}

// configRuntime records the CDI devices and the mounts of each container created, by container name.
type configRuntime struct {
	*critest.FakeRuntimeService
	mu     sync.Mutex
	cdi    map[string][]string
	mounts map[string][]*runtimeapi.Mount
}

func (r *configRuntime) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	var names []string
	for _, d := range cfg.CDIDevices {
		names = append(names, d.Name)
	}
	if r.cdi == nil {
		r.cdi, r.mounts = map[string][]string{}, map[string][]*runtimeapi.Mount{}
	}
	r.cdi[cfg.Metadata.Name] = names
	r.mounts[cfg.Metadata.Name] = cfg.Mounts
	r.mu.Unlock()
	return r.FakeRuntimeService.CreateContainer(ctx, sb, cfg, sbCfg)
}

func claimPod(uid, name string) *v1.Pod {
	pod := newPod(uid, name, "app", "plain")
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-template")}}
	pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return pod
}

// A pod's claims are prepared before its sandbox: a driver's failure keeps the pod from starting anything,
// with upstream's event; once prepared, the container naming the claim gets its CDI device, the other none.
func TestSyncPodPreparesClaimsBeforeTheSandbox(t *testing.T) {
	h := newHarness(t)
	rt := &configRuntime{FakeRuntimeService: h.rt}
	h.k.runtime = rt
	dra := &fakeDRA{prepareErr: errors.New(`NodePrepareResources failed for ResourceClaim gpu-x: device busy`)}
	h.k.cfg.DRA = dra
	pod := claimPod("u1", "web")

	_, err := h.sync(pod)
	if err == nil || !strings.Contains(err.Error(), "device busy") {
		t.Fatalf("sync with a failing driver: %v", err)
	}
	if n := countOf(h.rt.GetCalls(), "RunPodSandbox"); n != 0 {
		t.Fatalf("%d sandboxes created before the claims were prepared", n)
	}
	want := "Warning FailedPrepareDynamicResources Failed to prepare dynamic resources: NodePrepareResources failed for ResourceClaim gpu-x: device busy"
	if ev := h.rec.drain(); !hasEvent(ev, want) {
		t.Fatalf("events %v", ev)
	}

	dra.mu.Lock()
	dra.prepareErr = nil
	dra.mu.Unlock()
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	if got := rt.cdi["app"]; !slices.Equal(got, []string{"example.com/dev=web-gpu"}) {
		t.Errorf("app's CDI devices %v", got)
	}
	if got := rt.cdi["plain"]; len(got) != 0 {
		t.Errorf("a container naming no claim got %v", got)
	}
}

// A pod without a DRA manager is refused rather than started without its devices.
func TestSyncPodWithClaimsNeedsDRA(t *testing.T) {
	h := newHarness(t)
	_, err := h.sync(claimPod("u1", "web"))
	if !errors.Is(err, errNoDRA) || countOf(h.rt.GetCalls(), "RunPodSandbox") != 0 {
		t.Fatalf("err %v, calls %s", err, h.calls())
	}
}

// A finished pod's terminal phase waits until its claims are unprepared: the claim controller frees the
// devices of a pod it sees Succeeded.
func TestTerminalPhaseWaitsForUnprepare(t *testing.T) {
	h := newHarness(t)
	dra := &fakeDRA{}
	h.k.cfg.DRA = dra
	pod := claimPod("u1", "job")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	for _, cs := range h.containers(pod.UID) {
		h.exit(cs[0].Id, 0, t0)
	}
	out, _ := h.sync(pod)
	st, _ := h.k.status.PodStatus(pod.UID)
	if !out.terminal || st.Phase == v1.PodSucceeded {
		t.Fatalf("outcome %+v, phase %s: the pod must terminate with its phase held", out, st.Phase)
	}
	if err := h.k.syncTerminatingPod(h.ctx, pod, h.state(pod.UID), nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.k.status.PodStatus(pod.UID); st.Phase == v1.PodSucceeded || !dra.Holds(pod.UID) {
		t.Fatalf("phase %s while terminating", st.Phase)
	}
	if err := h.k.syncTerminatedPod(h.ctx, pod, h.state(pod.UID), false); err != nil {
		t.Fatal(err)
	}
	if dra.Holds(pod.UID) || !slices.Contains(dra.calls, "unprepare u1") {
		t.Fatalf("calls %v", dra.calls)
	}
	in := h.k.statusInput(pod, h.state(pod.UID))
	in.Terminal = true
	h.k.setStatus(pod, in.Previous, status.Compute(in))
	if st, _ := h.k.status.PodStatus(pod.UID); st.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s once unprepared", st.Phase)
	}
}
