package podsync

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/config"
	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
	"github.com/nodeagent/kubelet/pkg/pleg"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeSource is a PodSource fed by the test. It is synced from the start (its Run says so first) unless
// the test sets unsynced before Run, and then calls markSynced.
type fakeSource struct {
	ch       chan config.PodUpdate
	unsynced atomic.Bool
}

func (s *fakeSource) Run(ctx context.Context) {
	if !s.unsynced.Load() {
		s.ch <- config.PodUpdate{Op: config.SourceSynced, Source: config.SourceAPI}
	}
	<-ctx.Done()
}
func (s *fakeSource) Updates() <-chan config.PodUpdate { return s.ch }
func (s *fakeSource) Synced() bool                     { return !s.unsynced.Load() }
func (s *fakeSource) markSynced() {
	s.unsynced.Store(false)
	s.ch <- config.PodUpdate{Op: config.SourceSynced, Source: config.SourceAPI}
}
func (s *fakeSource) send(op config.Op, pods ...*v1.Pod) {
	s.ch <- config.PodUpdate{Op: op, Pods: pods}
}

// recorder collects events as "Type Reason Message" lines.
type recorder struct {
	*record.FakeRecorder
	mu  sync.Mutex
	all []string
}

func (r *recorder) drain() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		select {
		case e := <-r.Events:
			r.all = append(r.all, e)
		default:
			out := r.all
			r.all = nil
			return out
		}
	}
}

type harness struct {
	t      *testing.T
	k      *Kubelet
	rt     *critest.FakeRuntimeService
	img    *critest.FakeImageService
	client *fake.Clientset
	clock  *testclock.FakeClock
	rec    *recorder
	src    *fakeSource
	ctx    context.Context
	// runtime and cgroups, when set, replace h.rt and no pod cgroups in the kubelets newKubelet builds.
	runtime cri.RuntimeService
	cgroups PodCgroups
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{
		t:      t,
		rt:     critest.NewFakeRuntimeService(),
		img:    critest.NewFakeImageService(),
		client: fake.NewClientset(objs...),
		clock:  testclock.NewFakeClock(t0),
		rec:    &recorder{FakeRecorder: record.NewFakeRecorder(10000)},
		src:    &fakeSource{ch: make(chan config.PodUpdate, 100)},
		ctx:    context.Background(),
	}
	h.img.SetFakeImages([]string{"docker.io/library/busybox:1.35", "localhost/pause:3.10"})
	h.k = h.newKubelet(t.TempDir(), t.TempDir())
	return h
}

// newKubelet builds a kubelet on the harness's runtime, client and clock (a restart builds another).
func (h *harness) newKubelet(root, logs string) *Kubelet {
	h.t.Helper()
	k, err := New(Config{
		NodeName: "node1", RootDir: root, PodLogsDir: logs, MaxPods: 110,
		Client: kubeclienttest.Wrap(h.client), Runtime: h.rt, Images: h.img, Clock: h.clock, Recorder: h.rec,
		NodeIPs: func() []net.IP { return []net.IP{net.ParseIP("192.168.1.2")} },
		NodeAllocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}
		},
		Source:  h.src,
		Mirrors: nil,
		Cgroups: h.cgroups,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if h.runtime != nil {
		k.runtime = h.runtime
	}
	h.t.Cleanup(func() { _ = k.alloc.Flush() }) // no checkpoint write after the test's directories go
	return k
}

// state relists the pod and returns what the runtime holds for it.
func (h *harness) state(uid types.UID) *pleg.PodState {
	h.t.Helper()
	if err := h.k.pleg.RelistPod(h.ctx, uid); err != nil {
		h.t.Fatal(err)
	}
	st, err := h.k.pleg.Cache().Get(uid)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// sync runs one syncPod of pod against the current runtime state.
func (h *harness) sync(pod *v1.Pod) (syncOutcome, error) {
	h.t.Helper()
	return h.k.syncPod(h.ctx, pod, h.state(pod.UID))
}

// containers returns the pod's containers in the fake runtime by name, newest first.
func (h *harness) containers(uid types.UID) map[string][]*runtimeapi.ContainerStatus {
	return byName(h.state(uid), "")
}

// exit marks a container exited with code at the fake clock's time.
func (h *harness) exit(id string, code int32, startedAt time.Time) {
	h.rt.Lock()
	defer h.rt.Unlock()
	c := h.rt.Containers[id]
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.StartedAt = startedAt.UnixNano()
	c.FinishedAt = h.clock.Now().UnixNano()
}

func (h *harness) calls() string { return strings.Join(h.rt.GetCalls(), ",") }

func newPod(uid, name string, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(t0)},
		Spec:       v1.PodSpec{NodeName: "node1", RestartPolicy: v1.RestartPolicyAlways},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{
			Name: c, Image: "busybox:1.35", ImagePullPolicy: v1.PullIfNotPresent,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
		})
	}
	return p
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func hasEvent(events []string, substr string) bool {
	for _, e := range events {
		if strings.Contains(e, substr) {
			return true
		}
	}
	return false
}
