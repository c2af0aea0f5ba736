package podsync

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/volume"
)

// fakeVolumes is a PodVolumes whose MountPod the test decides.
type fakeVolumes struct {
	mu    sync.Mutex
	mount func(ctx context.Context, pod *v1.Pod) (map[string]volume.Mounted, error)
	calls int
}

func (f *fakeVolumes) MountPod(ctx context.Context, pod *v1.Pod) (map[string]volume.Mounted, error) {
	f.mu.Lock()
	f.calls++
	mount := f.mount
	f.mu.Unlock()
	return mount(ctx, pod)
}

func (f *fakeVolumes) UnmountPod(context.Context, types.UID) error { return nil }

func (f *fakeVolumes) set(mount func(ctx context.Context, pod *v1.Pod) (map[string]volume.Mounted, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mount = mount
}

// A pod without a sandbox mounts its volumes while the sandbox is created: the mount here returns only once
// it has seen the sandbox call, so a kubelet mounting first would fail the test.
func TestSyncPodMountsVolumesBesideTheSandbox(t *testing.T) {
	h := newHarness(t)
	vols := &fakeVolumes{}
	vols.set(func(context.Context, *v1.Pod) (map[string]volume.Mounted, error) {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if slices.Contains(h.rt.GetCalls(), "RunPodSandbox") {
				return map[string]volume.Mounted{}, nil
			}
			time.Sleep(time.Millisecond)
		}
		return nil, errors.New("the sandbox was not created while the volumes were mounted")
	})
	h.k.volumes = vols
	pod := newPod("u1", "web", "app")
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	if cs := h.containers(pod.UID); len(cs["app"]) != 1 {
		t.Fatalf("containers %v", cs)
	}
}

// Volumes that cannot be set up keep every container from starting, whether the sandbox was created beside
// the mount (first sync) or already runs (later syncs): a FailedMount event each time, the sync's error names
// the volumes, and no second sandbox. Once the volumes can be set up the containers start.
func TestSyncPodMountFailureKeepsContainersWaiting(t *testing.T) {
	h := newHarness(t)
	vols := &fakeVolumes{}
	failing := func(context.Context, *v1.Pod) (map[string]volume.Mounted, error) {
		return nil, &volume.SetupError{Volume: "cfg", Err: errors.New(`configmap "later" not found`)}
	}
	vols.set(failing)
	h.k.volumes = vols
	pod := newPod("u1", "web", "app")
	for i := 1; i <= 2; i++ {
		_, err := h.sync(pod)
		if err == nil || !strings.Contains(err.Error(), "mount volumes") {
			t.Fatalf("sync %d: %v", i, err)
		}
		calls := h.rt.GetCalls()
		if n := countOf(calls, "CreateContainer"); n != 0 {
			t.Fatalf("sync %d created %d containers without their volumes", i, n)
		}
		if n := countOf(calls, "RunPodSandbox"); n != 1 {
			t.Fatalf("sync %d: %d sandboxes", i, n)
		}
		want := `Warning FailedMount MountVolume.SetUp failed for volume "cfg" : configmap "later" not found`
		if ev := h.rec.drain(); !hasEvent(ev, want) {
			t.Fatalf("sync %d: events %v", i, ev)
		}
		st, _ := h.k.status.PodStatus(pod.UID)
		if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Waiting == nil || st.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
			t.Fatalf("sync %d: status %+v", i, st.ContainerStatuses)
		}
	}
	vols.set(func(context.Context, *v1.Pod) (map[string]volume.Mounted, error) {
		return map[string]volume.Mounted{}, nil
	})
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	if cs := h.containers(pod.UID); len(cs["app"]) != 1 {
		t.Fatalf("containers once the volumes mount: %v", cs)
	}
}
