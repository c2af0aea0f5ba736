package imagegc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
)

type fakeImages struct {
	mu      sync.Mutex
	images  []*runtimeapi.Image
	removed []string
	failOn  string
	listErr error // the runtime is gone
}

func (f *fakeImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	return slices.Clone(f.images), nil
}

func (f *fakeImages) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if spec.Image == f.failOn {
		return errors.New("image is in use by a container")
	}
	f.removed = append(f.removed, spec.Image)
	f.images = slices.DeleteFunc(f.images, func(i *runtimeapi.Image) bool { return i.Id == spec.Image })
	return nil
}

type fixture struct {
	clock      *testclock.FakeClock
	images     *fakeImages
	containers []*runtimeapi.Container
	volumes    []string // images of image volumes
	capacity   int64
	available  int64
	events     *record.FakeRecorder
	dir        string
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{clock: testclock.NewFakeClock(time.Unix(100000, 0)), capacity: 1000, available: 500,
		events: record.NewFakeRecorder(10), dir: t.TempDir(),
		images: &fakeImages{images: []*runtimeapi.Image{
			{Id: "sha256:app", RepoTags: []string{"localhost/app:1"}, Size: 100},
			{Id: "sha256:old", RepoTags: []string{"localhost/old:1"}, Size: 200},
			{Id: "sha256:web", RepoTags: []string{"localhost/web:1"}, RepoDigests: []string{"localhost/web@sha256:d1"}, Size: 300},
			{Id: "sha256:pause", RepoTags: []string{"localhost/pause:3.10"}, Size: 50, Pinned: true},
			{Id: "sha256:kept", RepoTags: []string{"localhost/kept:1"}, Size: 10},
		}}}
	return f
}

func (f *fixture) manager(t *testing.T) *Manager {
	t.Helper()
	m, err := New(context.Background(), Config{Images: f.images,
		Containers:   func(context.Context) ([]*runtimeapi.Container, error) { return f.containers, nil },
		VolumeImages: func() []string { return f.volumes },
		Fs:           func(context.Context) (int64, int64, error) { return f.capacity, f.available, nil },
		Keep:         []string{"localhost/kept:1"}, RootDir: f.dir, Recorder: f.events, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGarbageCollectAboveTheHighThreshold(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t)
	// web runs (known by digest), app ran until now; old was never used.
	f.containers = []*runtimeapi.Container{{Image: &runtimeapi.ImageSpec{Image: "localhost/web@sha256:d1"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{ImageRef: "sha256:app", State: runtimeapi.ContainerState_CONTAINER_EXITED}}
	if _, err := m.detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.containers = f.containers[:1]
	f.clock.Step(time.Minute)
	if _, err := m.detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 50% used: nothing to do.
	if err := m.GarbageCollect(context.Background()); err != nil || len(f.images.removed) != 0 {
		t.Fatalf("below the threshold: removed %v, %v", f.images.removed, err)
	}
	// 90% used: free 100 bytes to reach 80%. The images are younger than the minimum age: none may go yet.
	f.available = 100
	if err := m.GarbageCollect(context.Background()); err == nil || len(f.images.removed) != 0 {
		t.Fatalf("images younger than 2 min: removed %v, err %v", f.images.removed, err)
	}
	if ev := <-f.events.Events; !strings.Contains(ev, "FreeDiskSpaceFailed") || !strings.Contains(ev, "Attempted to free 100 bytes, but only found 0 bytes") {
		t.Errorf("event %q", ev)
	}
	f.clock.Step(2 * time.Minute)
	if err := m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.images.removed, " "); got != "sha256:old" {
		t.Errorf("removed %q, want the never-used image alone (200 bytes cover 100)", got)
	}
	f.available = 0 // 100% used: 200 more, and only app (unused now) may still go
	if err := m.GarbageCollect(context.Background()); err == nil {
		t.Error("no FreeDiskSpaceFailed when only 100 of 200 bytes could go")
	}
	if got := strings.Join(f.images.removed, " "); got != "sha256:old sha256:app" {
		t.Errorf("removed %q: never the running image, the pinned pause image or a kept one", got)
	}
}

// An image mounted as an image volume is in use though no container runs it; once no pod mounts it, it
// may go as any unused image.
func TestImageVolumesAreInUse(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t)
	f.volumes = []string{"localhost/old:1", "localhost/web@sha256:d1"}
	if _, err := m.detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(10 * time.Minute)
	f.available = 0
	if err := m.GarbageCollect(context.Background()); err == nil {
		t.Error("no FreeDiskSpaceFailed with only app (100 of 200 bytes) free to go")
	}
	if got := strings.Join(f.images.removed, " "); got != "sha256:app" {
		t.Errorf("removed %q, want app alone: old and web are mounted as volumes", got)
	}
	f.volumes = nil
	if err := m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.images.removed, " "); !strings.HasPrefix(got, "sha256:app sha256:") {
		t.Errorf("removed %q after the volumes' pods left", got)
	}
}

func TestTimesSurviveARestart(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t)
	f.containers = []*runtimeapi.Container{{ImageRef: "sha256:app"}}
	if _, err := m.detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	usedAt := f.clock.Now()
	f.containers = nil
	f.clock.Step(time.Hour)
	m2 := f.manager(t) // a restarted kubelet
	cands, err := m2.detect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cands, func(c candidate) bool { return c.id == "sha256:app" })
	if i < 0 || !cands[i].LastUsed.Equal(usedAt) || !cands[i].FirstDetected.Equal(usedAt) {
		t.Fatalf("after a restart: %+v, want first seen and last used an hour ago", cands)
	}
	// An hour old and unused: DeleteUnused (eviction's reclaim) removes all that may go.
	freed, err := m2.DeleteUnused(context.Background())
	if err != nil || freed != 600 {
		t.Errorf("DeleteUnused freed %d, %v; want app, old and web (600 bytes)", freed, err)
	}
	// A state file that cannot be read starts afresh without failing.
	if err := os.WriteFile(filepath.Join(f.dir, StateFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	m3 := f.manager(t)
	cands, _ = m3.detect(context.Background())
	for _, c := range cands {
		if !c.FirstDetected.Equal(f.clock.Now()) {
			t.Errorf("%s first seen %v after an unreadable state file, want now", c.id, c.FirstDetected)
		}
	}
}

func TestRemovalFailureIsSkipped(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t)
	f.images.failOn = "sha256:old"
	if _, err := m.detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Hour)
	freed, err := m.DeleteUnused(context.Background())
	if err != nil || freed != 400 || slices.Contains(f.images.removed, "sha256:old") {
		t.Errorf("freed %d (%v), removed %v; want app and web, old skipped", freed, err, f.images.removed)
	}
}

func TestMaximumAge(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t)
	m.cfg.MaxAge = 30 * time.Minute
	f.containers = []*runtimeapi.Container{{ImageRef: "sha256:web"}}
	if _, err := m.detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(31 * time.Minute)
	if err := m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.images.removed, " "); got != "sha256:app sha256:old" {
		t.Errorf("removed %q, want the two unused images (web runs, pause pinned, kept kept)", got)
	}
}

// The runtime or the image filesystem's measurement going away fails the collection with an error saying
// which (the kubelet records ImageGCFailed), and removes nothing.
func TestCollectionWithoutTheRuntime(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t)
	f.clock.Step(time.Hour)
	f.available = 0
	f.images.listErr = errors.New("connection refused")
	if err := m.GarbageCollect(context.Background()); err == nil || !strings.Contains(err.Error(), "list images") {
		t.Errorf("without the runtime: %v", err)
	}
	if _, err := m.DeleteUnused(context.Background()); err == nil {
		t.Error("DeleteUnused without the runtime succeeded")
	}
	f.images.listErr = nil
	m.cfg.Fs = func(context.Context) (int64, int64, error) { return 0, 0, errors.New("not measured") }
	if err := m.GarbageCollect(context.Background()); err == nil || !strings.Contains(err.Error(), "image filesystem") {
		t.Errorf("without the filesystem's size: %v", err)
	}
	if len(f.images.removed) != 0 {
		t.Errorf("removed %v on failures", f.images.removed)
	}
}
