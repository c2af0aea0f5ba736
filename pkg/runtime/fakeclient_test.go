package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/typeurl/v2"
	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/logd"
)

// fakeContainerd is the part of containerd a test of the runtime's rollbacks needs: container records, tasks
// whose calls can be made to fail, and snapshots without mounts. Calling anything else panics (the embedded
// interface is nil), which names what a new test must add.
type fakeContainerd struct {
	containerdClient
	records *memStore
	tasks   *fakeTasks
	images  map[string]images.Image
	fail    map[string]error // NewContainer, ContainerDelete
	// removedSnapshots are the keys of the snapshots removed.
	removedSnapshots []string
}

func newFakeContainerd() *fakeContainerd {
	return &fakeContainerd{records: &memStore{recs: map[string]containers.Container{}, now: time.Now}, tasks: &fakeTasks{fail: map[string]error{}},
		images: map[string]images.Image{}, fail: map[string]error{}}
}

func (f *fakeContainerd) ContainerService() containers.Store { return f.records }
func (f *fakeContainerd) TaskService() tasks.TasksClient     { return f.tasks }
func (f *fakeContainerd) SnapshotService(string) snapshots.Snapshotter {
	return noMounts{f: f}
}

type noMounts struct {
	snapshots.Snapshotter
	f *fakeContainerd
}

func (n noMounts) Remove(_ context.Context, key string) error {
	n.f.removedSnapshots = append(n.f.removedSnapshots, key)
	return nil
}

func (noMounts) Mounts(context.Context, string) ([]mount.Mount, error) { return nil, nil }

// View fails: a pause container then runs from a snapshot of its own (sandbox_rootfs.go).
func (noMounts) View(context.Context, string, string, ...snapshots.Opt) ([]mount.Mount, error) {
	return nil, errdefs.ErrNotImplemented
}

// fakeTasks is containerd's task service: it records the calls made, and answers a method named in fail with
// that error. A task exists from Create until Delete.
type fakeTasks struct {
	tasks.TasksClient
	mu    sync.Mutex
	calls []string
	live  map[string]bool
	fail  map[string]error
}

func (f *fakeTasks) call(method, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method+" "+id)
	if err := f.fail[method]; err != nil {
		return errgrpc.ToGRPC(err)
	}
	if f.live == nil {
		f.live = map[string]bool{}
	}
	switch method {
	case "Create":
		f.live[id] = true
	case "Delete":
		if !f.live[id] {
			return errgrpc.ToGRPC(errdefs.ErrNotFound)
		}
		delete(f.live, id)
	case "Start", "Kill", "Get", "Wait":
		if !f.live[id] {
			return errgrpc.ToGRPC(errdefs.ErrNotFound)
		}
	}
	return nil
}

func (f *fakeTasks) called(method, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls {
		if c == method+" "+id {
			return true
		}
	}
	return false
}

func (f *fakeTasks) Create(_ context.Context, in *tasks.CreateTaskRequest, _ ...grpc.CallOption) (*tasks.CreateTaskResponse, error) {
	return &tasks.CreateTaskResponse{ContainerID: in.ContainerID}, f.call("Create", in.ContainerID)
}

func (f *fakeTasks) Start(_ context.Context, in *tasks.StartRequest, _ ...grpc.CallOption) (*tasks.StartResponse, error) {
	if err := f.call("Start", in.ContainerID); err != nil {
		return nil, err
	}
	return &tasks.StartResponse{Pid: 1 << 30}, nil // a PID no process has
}

func (f *fakeTasks) Get(_ context.Context, in *tasks.GetRequest, _ ...grpc.CallOption) (*tasks.GetResponse, error) {
	if err := f.call("Get", in.ContainerID); err != nil {
		return nil, err
	}
	return &tasks.GetResponse{}, nil
}

func (f *fakeTasks) Kill(_ context.Context, in *tasks.KillRequest, _ ...grpc.CallOption) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, f.call("Kill", in.ContainerID)
}

func (f *fakeTasks) Wait(_ context.Context, in *tasks.WaitRequest, _ ...grpc.CallOption) (*tasks.WaitResponse, error) {
	return &tasks.WaitResponse{ExitStatus: 137}, f.call("Wait", in.ContainerID)
}

func (f *fakeTasks) Delete(_ context.Context, in *tasks.DeleteTaskRequest, _ ...grpc.CallOption) (*tasks.DeleteResponse, error) {
	return &tasks.DeleteResponse{}, f.call("Delete", in.ContainerID)
}

// fakeLogs is the log daemon: it records which containers it copies.
type fakeLogs struct {
	logd.Service
	mu     sync.Mutex
	open   map[string]bool
	closed []string
}

func (l *fakeLogs) Open(_ context.Context, s logd.Spec) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = map[string]bool{}
	}
	l.open[s.ID] = true
	return nil
}

func (l *fakeLogs) Drain(context.Context, string, time.Duration) error { return nil }

func (l *fakeLogs) Close(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.open, id)
	l.closed = append(l.closed, id)
	return nil
}

// testRuntime is a Runtime on fake, with its FIFOs and state in temporary directories and its log lines
// collected.
type testRuntime struct {
	*Runtime
	fake *fakeContainerd
	logs *fakeLogs
	ctx  context.Context
	mu   sync.Mutex
	log  []string
}

func newTestRuntime(t *testing.T) *testRuntime {
	t.Helper()
	fake, logs := newFakeContainerd(), &fakeLogs{}
	cfg := Config{Namespace: "test", StateDir: t.TempDir(), FIFODir: t.TempDir(), Snapshotter: "overlayfs",
		Clock: clocktesting.NewFakePassiveClock(time.Unix(1_700_000_000, 0)), Logs: logs}
	tr := &testRuntime{Runtime: newRuntime(cfg, fake, newRecordIndex(cfg.Namespace)), fake: fake, logs: logs}
	tr.ctx = klog.NewContext(context.Background(), funcr.New(func(prefix, args string) {
		tr.mu.Lock()
		tr.log = append(tr.log, args)
		tr.mu.Unlock()
	}, funcr.Options{Verbosity: 4}))
	return tr
}

// logged returns the collected log lines that contain every one of words.
func (tr *testRuntime) logged(words ...string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
next:
	for _, l := range tr.log {
		for _, w := range words {
			if !strings.Contains(l, w) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// addContainer stores a created container's record, as CreateContainer leaves it.
func (tr *testRuntime) addContainer(t *testing.T, id string, meta *containerMeta) {
	t.Helper()
	ext, err := typeurl.MarshalAny(meta)
	if err != nil {
		t.Fatal(err)
	}
	tr.fake.records.recs[id] = containers.Container{ID: id, Labels: map[string]string{labelKind: kindContainer},
		SnapshotKey: id, Snapshotter: "overlayfs", Extensions: map[string]typeurl.Any{extensionMeta: ext}}
}

var errBroken = errors.New("broken on purpose")

// images are the stored images the fake answers ImageService().Get with.
func (f *fakeContainerd) ImageService() images.Store { return fakeImages{f} }

type fakeImages struct{ f *fakeContainerd }

func (i fakeImages) Get(_ context.Context, name string) (images.Image, error) {
	img, ok := i.f.images[name]
	if !ok {
		return images.Image{}, errdefs.ErrNotFound
	}
	return img, nil
}

func (i fakeImages) List(context.Context, ...string) ([]images.Image, error) { return nil, nil }
func (i fakeImages) Create(context.Context, images.Image) (images.Image, error) {
	return images.Image{}, errdefs.ErrNotImplemented
}
func (i fakeImages) Update(context.Context, images.Image, ...string) (images.Image, error) {
	return images.Image{}, errdefs.ErrNotImplemented
}
func (i fakeImages) Delete(context.Context, string, ...images.DeleteOpt) error {
	return errdefs.ErrNotImplemented
}

func (f *fakeContainerd) LeasesService() leases.Manager { return fakeLeases{} }

type fakeLeases struct{ leases.Manager }

func (fakeLeases) Create(_ context.Context, opts ...leases.Opt) (leases.Lease, error) {
	var l leases.Lease
	for _, o := range opts {
		if err := o(&l); err != nil {
			return leases.Lease{}, err
		}
	}
	return l, nil
}

// NewContainer stores the record the options describe. Options that need a real client (a snapshot made
// from the image, a spec read from it) are skipped: the rollbacks under test do not read them.
func (f *fakeContainerd) NewContainer(ctx context.Context, id string, opts ...containerd.NewContainerOpts) (containerd.Container, error) {
	if err := f.fail["NewContainer"]; err != nil {
		return nil, err
	}
	c := containers.Container{ID: id}
	for _, o := range opts {
		func() {
			defer func() { _ = recover() }()
			_ = o(ctx, nil, &c)
		}()
	}
	f.records.mu.Lock()
	f.records.recs[id] = c
	f.records.mu.Unlock()
	return &fakeContainer{f: f, id: id}, nil
}

// fakeContainer is a stored container record as the client hands it out.
type fakeContainer struct {
	containerd.Container
	f  *fakeContainerd
	id string
}

func (c *fakeContainer) Info(ctx context.Context, _ ...containerd.InfoOpts) (containers.Container, error) {
	return c.f.records.Get(ctx, c.id)
}

func (c *fakeContainer) Delete(ctx context.Context, _ ...containerd.DeleteOpts) error {
	if err := c.f.fail["ContainerDelete"]; err != nil {
		return err
	}
	return c.f.records.Delete(ctx, c.id)
}
