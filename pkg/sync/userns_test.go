package podsync

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodeagent/kubelet/pkg/userns"
)

// usernsRuntime records the user namespace options of each sandbox and container it is asked for.
type usernsRuntime struct {
	*critest.FakeRuntimeService
	mu              sync.Mutex
	sandboxes, ctrs []*runtimeapi.UserNamespace
}

func (r *usernsRuntime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.mu.Lock()
	r.sandboxes = append(r.sandboxes, cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions())
	r.mu.Unlock()
	return r.FakeRuntimeService.RunPodSandbox(ctx, cfg, handler)
}

func (r *usernsRuntime) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.ctrs = append(r.ctrs, cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions())
	r.mu.Unlock()
	return r.FakeRuntimeService.CreateContainer(ctx, sb, cfg, sbCfg)
}

// A pod with hostUsers: false gets its range from the manager, recorded in its directory, on its sandbox and
// every container alike; the next such pod another range; a pod on the host's users none. The range is free
// again once the pod's content is removed.
func TestSyncPodUserNamespace(t *testing.T) {
	h := newHarness(t)
	rt := &usernsRuntime{FakeRuntimeService: h.rt}
	h.k.runtime = rt
	m, err := userns.New(userns.DefaultRange(userns.Unit), userns.Unit, 110, filepath.Join(h.k.cfg.RootDir, "pods"))
	if err != nil {
		t.Fatal(err)
	}
	h.k.cfg.UserNamespaces = m
	a := newPod("ua", "a", "app", "side")
	a.Spec.HostUsers = new(bool)
	if _, err := h.sync(a); err != nil {
		t.Fatal(err)
	}
	if len(rt.sandboxes) != 1 || len(rt.ctrs) != 2 {
		t.Fatalf("%d sandboxes, %d containers", len(rt.sandboxes), len(rt.ctrs))
	}
	for _, u := range append(rt.ctrs, rt.sandboxes[0]) {
		if u.GetMode() != runtimeapi.NamespaceMode_POD || u.GetUids()[0].GetHostId() != userns.Unit || u.GetGids()[0].GetHostId() != userns.Unit ||
			u.GetUids()[0].GetLength() != userns.Unit {
			t.Errorf("user namespace %v, want host IDs from 65536 for the sandbox and each container", u)
		}
	}
	if _, err := os.Stat(filepath.Join(h.k.podDir(a.UID), userns.FileName)); err != nil {
		t.Errorf("the allocation is not in the pod's directory: %v", err)
	}
	b := newPod("ub", "b", "app")
	b.Spec.HostUsers = new(bool)
	plain := newPod("up", "plain", "app")
	for _, p := range []*v1.Pod{b, plain} {
		if _, err := h.sync(p); err != nil {
			t.Fatal(err)
		}
	}
	if got := rt.sandboxes[1].GetUids()[0].GetHostId(); got != 2*userns.Unit {
		t.Errorf("the second pod maps host IDs from %d", got)
	}
	if rt.sandboxes[2] != nil {
		t.Errorf("a pod on the host's users got %v", rt.sandboxes[2])
	}
	if err := h.k.removePodContent(h.ctx, a, h.state(a.UID)); err != nil {
		t.Fatal(err)
	}
	if n := m.Allocated(); n != 1 {
		t.Errorf("%d ranges allocated after the first pod's removal, want 1", n)
	}
}

// With user namespaces off, a pod that asks for one gets no sandbox, and an event that says why.
func TestSyncPodUserNamespacesOff(t *testing.T) {
	h := newHarness(t)
	p := newPod("u1", "p", "app")
	p.Spec.HostUsers = new(bool)
	if _, err := h.sync(p); err == nil {
		t.Fatal("the sync succeeded")
	}
	if countOf(h.rt.GetCalls(), "RunPodSandbox") != 0 {
		t.Error("a sandbox was created")
	}
	if ev := h.rec.drain(); !hasEvent(ev, "FailedCreatePodSandBox Failed to create pod sandbox: spec.hostUsers: false asks for a user namespace") {
		t.Errorf("events %v", ev)
	}
}
