package pleg

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// startPod runs a sandbox and one running container for uid in the fake runtime; it returns their IDs.
func startPod(t *testing.T, rt *critest.FakeRuntimeService, uid string) (string, string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{LabelPodUID: uid, LabelPodName: "p" + uid, LabelPodNamespace: "ns"}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p" + uid, Namespace: "ns", Uid: uid},
		Labels:   labels,
	}
	sb, err := rt.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	cid, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Labels:   labels,
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, cid); err != nil {
		t.Fatal(err)
	}
	return sb, cid
}

func drain(p *PLEG) []Event {
	var out []Event
	for {
		select {
		case e := <-p.Watch():
			out = append(out, *e)
		default:
			return out
		}
	}
}

func TestRelist(t *testing.T) {
	ctx := context.Background()
	rt := critest.NewFakeRuntimeService()
	clk := testclock.NewFakeClock(t0)
	p := New(rt, clk, Options{})
	sb, cid := startPod(t, rt, "a")

	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	want := []Event{{"a", ContainerStarted, sb}, {"a", ContainerStarted, cid}}
	if got := drain(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("first relist events %v, want %v", got, want)
	}
	state, err := p.Cache().Get("a")
	if err != nil || len(state.Sandboxes) != 1 || len(state.Containers) != 1 || state.Name != "pa" || state.Namespace != "ns" {
		t.Fatalf("cached state %+v, %v", state, err)
	}

	clk.Step(time.Second)
	if err := rt.StopContainer(ctx, cid, 0); err != nil {
		t.Fatal(err)
	}
	_ = p.Relist(ctx)
	if got := drain(p); !reflect.DeepEqual(got, []Event{{"a", ContainerDied, cid}}) {
		t.Fatalf("events after stop %v", got)
	}
	state, _ = p.Cache().Get("a")
	if state.Containers[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("cache not updated: %v", state.Containers[0].State)
	}

	clk.Step(time.Second)
	_ = rt.RemoveContainer(ctx, cid)
	_ = rt.StopPodSandbox(ctx, sb)
	_ = rt.RemovePodSandbox(ctx, sb)
	_ = p.Relist(ctx)
	want = []Event{{"a", ContainerDied, sb}, {"a", ContainerRemoved, sb}, {"a", ContainerRemoved, cid}}
	if got := drain(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("events after removal %v, want %v", got, want)
	}
	if uids := p.Cache().UIDs(); len(uids) != 0 {
		t.Errorf("removed pod still cached: %v", uids)
	}
}

// relistFailingInspection starts pod a and relists once with its inspection failing: no event, an error cached.
func relistFailingInspection(t *testing.T) (p *PLEG, rt *critest.FakeRuntimeService, sandboxID, containerID string) {
	t.Helper()
	rt = critest.NewFakeRuntimeService()
	p = New(rt, testclock.NewFakeClock(t0), Options{})
	sandboxID, containerID = startPod(t, rt, "a")
	rt.InjectError("ContainerStatus", errors.New("runtime busy"))
	_ = p.Relist(context.Background())
	if got := drain(p); len(got) != 0 {
		t.Fatalf("events sent for a pod whose inspection failed: %v", got)
	}
	if _, err := p.Cache().Get("a"); err == nil {
		t.Fatalf("cache holds no error for the failed inspection")
	}
	return p, rt, sandboxID, containerID
}

func TestRelistRetriesFailedInspection(t *testing.T) {
	ctx := context.Background()
	p, _, _, cid := relistFailingInspection(t)
	_ = p.Relist(ctx)
	got := drain(p)
	if len(got) != 2 || got[1].ID != cid {
		t.Fatalf("events not sent again after the retry: %v", got)
	}
	if _, err := p.Cache().Get("a"); err != nil {
		t.Fatalf("cache error after a good inspection: %v", err)
	}
}

// A pod whose first inspection failed, and that is gone by the next relist, leaves nothing in the cache.
func TestRelistForgetsFailedPodThatIsGone(t *testing.T) {
	ctx := context.Background()
	p, rt, sb, cid := relistFailingInspection(t)
	for _, err := range []error{rt.RemoveContainer(ctx, cid), rt.RemovePodSandbox(ctx, sb)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if uids := p.Cache().UIDs(); len(uids) != 0 {
		t.Errorf("pod gone from the runtime still cached: %v", uids)
	}
	if len(p.reinspect) != 0 {
		t.Errorf("pod gone from the runtime still to re-inspect: %v", p.reinspect)
	}
}

func TestRelistPod(t *testing.T) {
	ctx := context.Background()
	rt := critest.NewFakeRuntimeService()
	clk := testclock.NewFakeClock(t0)
	p := New(rt, clk, Options{})
	startPod(t, rt, "a")
	_ = p.Relist(ctx)
	drain(p)
	_, cidB := startPod(t, rt, "b")
	_, cidC := startPod(t, rt, "c")
	clk.Step(time.Second)
	if err := p.RelistPod(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	got := drain(p)
	if len(got) != 2 || got[0].UID != "b" || got[1].ID != cidB {
		t.Fatalf("pod relist events %v", got)
	}
	// The next full relist reports only what it has not seen: pod c.
	_ = p.Relist(ctx)
	got = drain(p)
	if len(got) != 2 || got[0].UID != "c" || got[1].ID != cidC {
		t.Fatalf("full relist events %v", got)
	}
}

// gatedRuntime holds the first ContainerStatus of gateUID's container, after reading it, until release is
// closed: a slow read, whose answer is stale by the time it returns.
type gatedRuntime struct {
	*critest.FakeRuntimeService
	gateID  string
	gated   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := g.FakeRuntimeService.ContainerStatus(ctx, id, verbose)
	if id == g.gateID && g.gated.CompareAndSwap(false, true) {
		close(g.entered)
		<-g.release
	}
	return resp, err
}

// relistPodWithin relists uid and fails the test if that takes 5 s: what it waits for, said by what.
func relistPodWithin(t *testing.T, p *PLEG, uid types.UID, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.RelistPod(context.Background(), uid) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(what)
	}
}

func newGated(t *testing.T) (*gatedRuntime, string) {
	fake := critest.NewFakeRuntimeService()
	_, cid := startPod(t, fake, "a")
	return &gatedRuntime{FakeRuntimeService: fake, gateID: cid, entered: make(chan struct{}), release: make(chan struct{})}, cid
}

// A slow relist of one pod does not hold up the relist of another.
func TestRelistPodsInParallel(t *testing.T) {
	ctx := context.Background()
	rt, _ := newGated(t)
	p := New(rt, testclock.NewFakeClock(t0), Options{})
	startPod(t, rt.FakeRuntimeService, "b")
	slow := make(chan error, 1)
	go func() { slow <- p.RelistPod(ctx, "a") }()
	<-rt.entered
	relistPodWithin(t, p, "b", "relist of pod b waited for the slow relist of pod a")
	if st, err := p.Cache().Get("b"); err != nil || len(st.Containers) != 1 {
		t.Errorf("pod b not cached: %+v %v", st, err)
	}
	close(rt.release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

// A pod relist that read the runtime before a full relist did, and returns after it, records nothing: the
// cache keeps the newer state and no event goes back in time.
func TestRelistPodDropsStaleRead(t *testing.T) {
	ctx := context.Background()
	rt, cid := newGated(t)
	clk := testclock.NewFakeClock(t0)
	p := New(rt, clk, Options{})
	slow := make(chan error, 1)
	go func() { slow <- p.RelistPod(ctx, "a") }()
	<-rt.entered // it has read the container running

	if err := rt.StopContainer(ctx, cid, 0); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	close(rt.release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	st, _ := p.Cache().Get("a")
	if len(st.Containers) != 1 || st.Containers[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("cached container %+v, want the exited state of the newer relist", st.Containers)
	}
	var types []EventType
	for _, e := range drain(p) {
		types = append(types, e.Type)
	}
	if want := []EventType{ContainerStarted, ContainerDied}; !reflect.DeepEqual(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
}

func TestCacheGetNewerThan(t *testing.T) {
	c := NewCache()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.GetNewerThan(ctx, "a", time.Time{}); err == nil {
		t.Fatal("answered before the first relist")
	}

	got := make(chan *PodState, 1)
	go func() {
		s, _ := c.GetNewerThan(context.Background(), "a", t0)
		got <- s
	}()
	c.Set("a", &PodState{UID: "a", Name: "old"}, nil, t0.Add(-time.Second))
	select {
	case <-got:
		t.Fatal("answered with state older than asked")
	case <-time.After(20 * time.Millisecond):
	}
	c.Set("a", &PodState{UID: "a", Name: "new"}, nil, t0)
	if s := <-got; s.Name != "new" {
		t.Fatalf("got %+v", s)
	}

	// A pod the runtime has nothing for is answered once a relist newer than asked completed.
	go func() {
		s, _ := c.GetNewerThan(context.Background(), "b", t0)
		got <- s
	}()
	time.Sleep(5 * time.Millisecond)
	c.UpdateTime(t0)
	if s := <-got; s.UID != types.UID("b") || len(s.Containers) != 0 {
		t.Fatalf("got %+v", s)
	}
}

func TestHealthy(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	clk := testclock.NewFakeClock(t0)
	p := New(rt, clk, Options{})
	if p.Healthy() == nil {
		t.Fatal("healthy before any relist")
	}
	_ = p.Relist(context.Background())
	if err := p.Healthy(); err != nil {
		t.Fatal(err)
	}
	clk.Step(RelistThreshold)
	if err := p.Healthy(); err != nil {
		t.Fatalf("unhealthy at the threshold: %v", err)
	}
	rt.InjectError("ListPodSandbox", errors.New("down"))
	if err := p.Relist(context.Background()); err == nil {
		t.Fatal("relist did not fail")
	}
	clk.Step(time.Second)
	if err := p.Healthy(); err == nil || !strings.Contains(err.Error(), "threshold is 3m0s; the last relist failed: list pod sandboxes: down") {
		t.Fatalf("after 3 min without a relist: %v, want why", err)
	}
}

func TestRunRelistsPeriodicallyAndOnRuntimeEvents(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	clk := testclock.NewFakeClock(t0)
	runtimeEvents := make(chan *runtimeapi.ContainerEventResponse, 4)
	p := New(rt, clk, Options{RuntimeEvents: runtimeEvents})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitEvent := func(what string) Event {
		t.Helper()
		select {
		case e := <-p.Watch():
			return *e
		case <-time.After(5 * time.Second):
			t.Fatalf("no event: %s", what)
		}
		return Event{}
	}
	_, cid := startPod(t, rt, "a")
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(RelistPeriod)
	if e := waitEvent("periodic relist"); e.UID != "a" {
		t.Fatalf("event %+v", e)
	}
	drainWait := time.After(50 * time.Millisecond)
	for loop := true; loop; {
		select {
		case <-p.Watch():
		case <-drainWait:
			loop = false
		}
	}

	// A runtime event makes the exit visible without waiting for the next tick.
	_ = rt.StopContainer(context.Background(), cid, 0)
	runtimeEvents <- &runtimeapi.ContainerEventResponse{
		ContainerId:        cid,
		ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		PodSandboxStatus:   &runtimeapi.PodSandboxStatus{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "a"}},
	}
	if e := waitEvent("runtime event"); e.Type != ContainerDied || e.ID != cid {
		t.Fatalf("event %+v", e)
	}
}

// A full relist that is slow to inspect one pod neither holds up the relist of another pod (a pod worker's,
// right after it started a container) nor overwrites what that relist recorded.
func TestRelistDoesNotHoldUpPodRelist(t *testing.T) {
	ctx := context.Background()
	rt, _ := newGated(t)
	clk := testclock.NewFakeClock(t0)
	p := New(rt, clk, Options{})
	_, cidB := startPod(t, rt.FakeRuntimeService, "b")
	full := make(chan error, 1)
	go func() { full <- p.Relist(ctx) }()
	<-rt.entered // the full relist waits on pod a's container

	if err := rt.StopContainer(ctx, cidB, 0); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	relistPodWithin(t, p, "b", "relist of pod b waited for the full relist")
	close(rt.release)
	if err := <-full; err != nil {
		t.Fatal(err)
	}
	st, _ := p.Cache().Get("b")
	if len(st.Containers) != 1 || st.Containers[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("pod b's cached container %+v, want the exited state its own relist read", st.Containers)
	}
	if st, _ := p.Cache().Get("a"); len(st.Containers) != 1 {
		t.Errorf("pod a not cached by the full relist: %+v", st)
	}
	var last EventType
	for _, e := range drain(p) {
		if e.UID == "b" {
			last = e.Type
		}
	}
	if last != ContainerDied {
		t.Errorf("last event of pod b %q, want %q", last, ContainerDied)
	}
}

// listGatedRuntime holds the first filtered ListPodSandbox (a single-pod relist's) until release is closed,
// and the first ContainerStatus of gateID (a full relist's inspection) until inspectRelease is closed.
type listGatedRuntime struct {
	*gatedRuntime
	listGated   atomic.Bool
	listEntered chan struct{}
	listRelease chan struct{}
}

func (g *listGatedRuntime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if filter != nil && g.listGated.CompareAndSwap(false, true) {
		close(g.listEntered)
		<-g.listRelease
	}
	return g.FakeRuntimeService.ListPodSandbox(ctx, filter)
}

// A single-pod relist that began before a full relist but read the runtime after it (and saw the container
// exit) records while the full relist inspects. The full relist does not move the pod back to running: no
// ContainerStarted follows the ContainerDied, and the next relist settles the cache on the exit.
func TestRelistKeepsRacedPodRelist(t *testing.T) {
	ctx := context.Background()
	gated, _ := newGated(t) // the full relist's inspection of pod a waits
	rt := &listGatedRuntime{gatedRuntime: gated, listEntered: make(chan struct{}), listRelease: make(chan struct{})}
	clk := testclock.NewFakeClock(t0)
	p := New(rt, clk, Options{})
	_, cidB := startPod(t, rt.FakeRuntimeService, "b")

	single := make(chan error, 1)
	go func() { single <- p.RelistPod(ctx, "b") }() // begins at t0, waits before listing
	<-rt.listEntered
	clk.Step(time.Second)
	full := make(chan error, 1)
	go func() { full <- p.Relist(ctx) }() // lists b running, then waits inspecting a
	<-rt.entered
	if err := rt.StopContainer(ctx, cidB, 0); err != nil {
		t.Fatal(err)
	}
	close(rt.listRelease) // the single-pod relist now reads b exited and records it
	if err := <-single; err != nil {
		t.Fatal(err)
	}
	close(rt.release)
	if err := <-full; err != nil {
		t.Fatal(err)
	}
	var typesB []EventType
	for _, e := range drain(p) {
		if e.UID == "b" {
			typesB = append(typesB, e.Type)
		}
	}
	if n := len(typesB); n == 0 || typesB[n-1] != ContainerDied {
		t.Errorf("events of pod b %v, want ContainerDied last", typesB)
	}
	clk.Step(time.Second)
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ := p.Cache().Get("b")
	if len(st.Containers) != 1 || st.Containers[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("pod b cached %+v after the next relist, want its container exited", st.Containers)
	}
	for _, e := range drain(p) {
		if e.UID == "b" && e.Type == ContainerStarted {
			t.Errorf("the next relist sent %v for pod b", e)
		}
	}
}

// hangingRuntime blocks ContainerStatus of one container, whatever its context says, until released.
type hangingRuntime struct {
	*critest.FakeRuntimeService
	hang    atomic.Value // container ID
	release chan struct{}
}

func (h *hangingRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	if v, _ := h.hang.Load().(string); v == id {
		<-h.release
	}
	return h.FakeRuntimeService.ContainerStatus(ctx, id, verbose)
}

// A pod whose runtime call hangs is left out of relists, listed as stuck, and read again once the call
// returns; the other pods' events flow and relists stay fast (the node stays Ready).
func TestStuckInspection(t *testing.T) {
	ctx := context.Background()
	rt := &hangingRuntime{FakeRuntimeService: critest.NewFakeRuntimeService(), release: make(chan struct{})}
	p := New(rt, clock.RealClock{}, Options{InspectTimeout: 200 * time.Millisecond})
	_, ca := startPod(t, rt.FakeRuntimeService, "a")
	_, cb := startPod(t, rt.FakeRuntimeService, "b")
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	drain(p)
	for _, id := range []string{ca, cb} {
		if err := rt.StopContainer(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	rt.hang.Store(ca)
	start := time.Now()
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a relist took %v with one hung call", took)
	}
	got := drain(p)
	if len(got) != 1 || got[0].UID != "b" || got[0].Type != ContainerDied {
		t.Fatalf("events %v, want b's container died alone", got)
	}
	if stuck := p.Stuck(); len(stuck) != 1 || stuck[0].UID != "a" || stuck[0].Name != "pa" {
		t.Fatalf("stuck %+v, want pod a", stuck)
	}
	if st, _ := p.Cache().Get("a"); len(st.Containers) != 1 || st.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("a stuck pod's record changed: %+v", st)
	}
	// A second relist while the call is still out does not ask again.
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	// Nor does a single-pod relist (a runtime event, a pod worker) wait on it.
	start = time.Now()
	if err := p.RelistPod(ctx, "a"); err != nil || time.Since(start) > time.Second {
		t.Fatalf("a single-pod relist of the stuck pod: %v after %v", err, time.Since(start))
	}
	close(rt.release)
	deadline := time.Now().Add(5 * time.Second)
	for len(p.Stuck()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(p.Stuck()) > 0 {
		t.Fatal("the pod stayed stuck after its call returned")
	}
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(p); len(got) != 1 || got[0].UID != "a" || got[0].Type != ContainerDied {
		t.Fatalf("events after the call returned %v, want a's container died", got)
	}
}
