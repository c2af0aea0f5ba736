package eviction

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/status"
)

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

const mi = 1 << 20

// summaryOf is a node with 1000Mi of memory of which availMi is available, a 100 GiB nodefs with availGi
// free, and pods using the memory given (Mi), all observed at at.
func summaryOf(at time.Time, availMi uint64, availGi uint64, pods map[string]uint64) *statsapi.Summary {
	t := metav1.NewTime(at)
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{Time: t, AvailableBytes: u64(availMi * mi), WorkingSetBytes: u64((1000 - availMi) * mi)},
		Fs: &statsapi.FsStats{Time: t, AvailableBytes: u64(availGi << 30), CapacityBytes: u64(100 << 30),
			InodesFree: u64(900), Inodes: u64(1000)},
	}}
	for uid, used := range pods {
		s.Pods = append(s.Pods, statsapi.PodStats{PodRef: statsapi.PodReference{Name: uid, Namespace: "ns", UID: uid},
			Memory:     &statsapi.MemoryStats{Time: t, WorkingSetBytes: u64(used * mi)},
			Containers: []statsapi.ContainerStats{{Name: "c", Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(used * mi)}}}})
	}
	return s
}

func pod(uid string, requestMi int64, prio int32) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
		Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c"}}}}
	if requestMi > 0 {
		q := *resource.NewQuantity(requestMi*mi, resource.BinarySI)
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: q}, Limits: v1.ResourceList{v1.ResourceMemory: q}}
	}
	return p
}

func TestObserve(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := summaryOf(at, 300, 20, nil)
	s.Node.SystemContainers = []statsapi.ContainerStats{{Name: statsapi.SystemContainerPods,
		Memory: &statsapi.MemoryStats{Time: metav1.NewTime(at), AvailableBytes: u64(50 * mi), WorkingSetBytes: u64(450 * mi)}}}
	s.Node.Rlimit = &statsapi.RlimitStats{Time: metav1.NewTime(at), MaxPID: i64(4096), NumOfRunningProcesses: i64(96)}
	s.Node.Runtime = &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{AvailableBytes: u64(5), CapacityBytes: u64(10), Inodes: u64(0), InodesFree: u64(0)}}
	obs := observe(s)
	for sig, want := range map[Signal][2]int64{
		SignalMemoryAvailable:            {300 * mi, 1000 * mi},
		SignalAllocatableMemoryAvailable: {50 * mi, 500 * mi},
		SignalNodeFsAvailable:            {20 << 30, 100 << 30},
		SignalNodeFsInodesFree:           {900, 1000},
		SignalImageFsAvailable:           {5, 10},
		SignalPIDAvailable:               {4000, 4096},
	} {
		if o, ok := obs[sig]; !ok || o.available != want[0] || o.capacity != want[1] {
			t.Errorf("%s: %+v %v, want available %d of %d", sig, o, ok, want[0], want[1])
		}
	}
	if _, ok := obs[SignalImageFsInodesFree]; ok {
		t.Error("a filesystem without inode accounting has no inodesFree signal")
	}
	// A read that failed leaves its signal unobserved, never zero.
	s.Node.Memory.AvailableBytes = nil
	s.Node.Fs = nil
	obs = observe(s)
	if _, ok := obs[SignalMemoryAvailable]; ok {
		t.Error("memory.available observed without a reading")
	}
	ts, _ := Parse(DefaultHard, nil, nil, nil)
	if got := met(ts, obs, false); len(got) != 0 {
		t.Errorf("thresholds met on missing readings: %v", got)
	}
	if len(observe(nil)) != 0 {
		t.Error("no summary, no observations")
	}
}

func TestMetAndMinReclaim(t *testing.T) {
	obs := observations{SignalMemoryAvailable: {available: 150 * mi, capacity: 1000 * mi},
		SignalNodeFsAvailable: {available: 9, capacity: 100}}
	ts, _ := Parse(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}, nil, nil,
		map[string]string{"memory.available": "100Mi"})
	if got := met(ts, obs, false); len(got) != 1 || got[0].Signal != SignalNodeFsAvailable {
		t.Errorf("met: %v, want nodefs.available only (9%% < 10%%; 150Mi > 100Mi)", got)
	}
	// Once acting, memory stays met until 100Mi + 100Mi are available.
	if got := met(ts, obs, true); len(got) != 2 {
		t.Errorf("met with reclaim: %v, want both", got)
	}
	// Exactly at a threshold is not below it.
	at := observations{SignalMemoryAvailable: {available: 100 * mi, capacity: 1000 * mi}, SignalNodeFsAvailable: {available: 10, capacity: 100}}
	if got := met(ts, at, false); len(got) != 0 {
		t.Errorf("at the thresholds: %v met, want none", got)
	}
}

func TestConditionsHeldForTransitionPeriod(t *testing.T) {
	now := time.Unix(1000, 0)
	last := map[v1.NodeConditionType]time.Time{}
	mem := []Threshold{{Signal: SignalMemoryAvailable}, {Signal: SignalAllocatableMemoryAvailable}, {Signal: SignalNodeFsInodesFree}}
	if got := conditionsHeld(conditions(mem), last, time.Minute, now); len(got) != 2 || got[0] != v1.NodeMemoryPressure || got[1] != v1.NodeDiskPressure {
		t.Fatalf("conditions: %v", got)
	}
	if got := conditionsHeld(nil, last, time.Minute, now.Add(59*time.Second)); len(got) != 2 {
		t.Errorf("within the transition period: %v, want both held", got)
	}
	if got := conditionsHeld(nil, last, time.Minute, now.Add(time.Minute)); len(got) != 0 {
		t.Errorf("after the transition period: %v, want none", got)
	}
}

// The ranking mirrors upstream's rankMemoryPressure cases: pods over their requests first, then lower
// priority, then more usage above the request; pods without stats before all.
func TestRankMemoryPressure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pods  []*v1.Pod
		usage map[string]uint64
		want  string
	}{
		{name: "exceeding requests before priority",
			pods:  []*v1.Pod{pod("guaranteed-low", 100, 0), pod("burst-high", 10, 100)},
			usage: map[string]uint64{"guaranteed-low": 50, "burst-high": 20}, want: "burst-high guaranteed-low"},
		{name: "priority among those exceeding",
			pods:  []*v1.Pod{pod("high", 0, 100), pod("low", 0, 0)},
			usage: map[string]uint64{"high": 500, "low": 10}, want: "low high"},
		{name: "usage above request at equal priority",
			pods:  []*v1.Pod{pod("small", 0, 0), pod("big", 0, 0), pod("big-but-requested", 400, 0)},
			usage: map[string]uint64{"small": 10, "big": 300, "big-but-requested": 500}, want: "big big-but-requested small"},
		{name: "no stats first",
			pods:  []*v1.Pod{pod("known", 0, 0), pod("unknown", 0, 0)},
			usage: map[string]uint64{"known": 900}, want: "unknown known"},
		{name: "within requests, priority then usage",
			pods:  []*v1.Pod{pod("a", 100, 10), pod("b", 100, 0), pod("c", 100, 0)},
			usage: map[string]uint64{"a": 10, "b": 20, "c": 90}, want: "c b a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := statsByPod(summaryOf(time.Now(), 50, 50, tc.usage))
			rank(tc.pods, ps, v1.ResourceMemory)
			var got []string
			for _, p := range tc.pods {
				got = append(got, p.Name)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("ranked %v, want %s", got, tc.want)
			}
		})
	}
}

func TestRankDiskAndPIDs(t *testing.T) {
	disk := func(uid string, used, inodes, procs uint64) statsapi.PodStats {
		return statsapi.PodStats{PodRef: statsapi.PodReference{UID: uid}, EphemeralStorage: &statsapi.FsStats{UsedBytes: u64(used), InodesUsed: u64(inodes)},
			ProcessStats: &statsapi.ProcessStats{ProcessCount: u64(procs)}}
	}
	s := &statsapi.Summary{Pods: []statsapi.PodStats{disk("a", 100, 5, 50), disk("b", 900, 1, 5), disk("c", 500, 9, 20)}}
	requested := pod("c", 0, 0)
	requested.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: *resource.NewQuantity(1000, resource.BinarySI)}
	for _, tc := range []struct {
		r    v1.ResourceName
		want string
	}{
		{v1.ResourceEphemeralStorage, "b a c"}, // c is within its request
		{resourceInodes, "c a b"},
		{resourcePIDs, "a c b"},
	} {
		pods := []*v1.Pod{pod("a", 0, 0), pod("b", 0, 0), requested}
		rank(pods, statsByPod(s), tc.r)
		var got []string
		for _, p := range pods {
			got = append(got, p.Name)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: ranked %v, want %s", tc.r, got, tc.want)
		}
	}
}

func TestAdmit(t *testing.T) {
	be := pod("be", 0, 0)
	burstable := pod("b", 0, 0)
	burstable.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}
	tolerating := pod("tol", 0, 0)
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	critical := pod("crit", 0, 2000000000)
	mem, disk := []v1.NodeConditionType{v1.NodeMemoryPressure}, []v1.NodeConditionType{v1.NodeDiskPressure}
	for _, tc := range []struct {
		pod   *v1.Pod
		conds []v1.NodeConditionType
		ok    bool
	}{
		{be, nil, true}, {be, mem, false}, {burstable, mem, true}, {tolerating, mem, true},
		{burstable, disk, false}, {critical, disk, true}, {critical, append(mem, disk...), true},
		{burstable, append(mem, disk...), false},
	} {
		ok, reason, msg := admit(tc.pod, tc.conds)
		if ok != tc.ok {
			t.Errorf("%s under %v: admitted %v, want %v", tc.pod.Name, tc.conds, ok, tc.ok)
		}
		if !ok && (reason != status.ReasonEvicted || !strings.Contains(msg, "The node had condition: [")) {
			t.Errorf("%s: refused with %q %q", tc.pod.Name, reason, msg)
		}
	}
}

type evicted struct {
	pod     *v1.Pod
	grace   int64
	message string
}

type fakeEvicter struct{ got []evicted }

func (f *fakeEvicter) EvictPod(_ context.Context, pod *v1.Pod, grace int64, msg string) error {
	f.got = append(f.got, evicted{pod, grace, msg})
	return nil
}

type fakeReclaimer struct {
	calls int
	frees func()
	err   error
}

func (f *fakeReclaimer) Reclaim(context.Context, v1.ResourceName) error {
	f.calls++
	if f.frees != nil {
		f.frees()
	}
	return f.err
}

type managerFixture struct {
	clock   *testclock.FakeClock
	sum     *statsapi.Summary
	pods    []*v1.Pod
	evicter *fakeEvicter
	events  *record.FakeRecorder
	m       *Manager
}

func newManager(t *testing.T, hard, soft, grace map[string]string) *managerFixture {
	t.Helper()
	ts, err := Parse(hard, soft, grace, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &managerFixture{clock: testclock.NewFakeClock(time.Unix(10000, 0)), evicter: &fakeEvicter{}, events: record.NewFakeRecorder(100)}
	f.m = New(Config{Thresholds: ts, TransitionPeriod: time.Minute, MaxPodGracePeriod: 20,
		Summary: func() *statsapi.Summary { return f.sum }, ActivePods: func() []*v1.Pod { return f.pods },
		Evicter: f.evicter, Recorder: f.events, Clock: f.clock})
	return f
}

func TestSynchronizeEvictsOneBestEffortPodUnderMemoryPressure(t *testing.T) {
	f := newManager(t, map[string]string{"memory.available": "100Mi"}, nil, nil)
	f.pods = []*v1.Pod{pod("guaranteed", 200, 0), pod("besteffort", 0, 0), pod("other", 0, 0)}
	f.sum = summaryOf(f.clock.Now(), 500, 50, map[string]uint64{"guaranteed": 150, "besteffort": 300, "other": 20})
	if f.m.Synchronize(context.Background()) != nil {
		t.Fatal("evicted with 500Mi available")
	}
	f.sum = summaryOf(f.clock.Now(), 80, 50, map[string]uint64{"guaranteed": 150, "besteffort": 300, "other": 20})
	got := f.m.Synchronize(context.Background())
	if got == nil || got.Name != "besteffort" || len(f.evicter.got) != 1 {
		t.Fatalf("evicted %v (%d), want besteffort alone", got, len(f.evicter.got))
	}
	e := f.evicter.got[0]
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container c was using 300Mi, request is 0, has larger consumption of memory."
	if e.grace != immediateGrace || e.message != want {
		t.Errorf("eviction: grace %d message %q, want %d %q", e.grace, e.message, immediateGrace, want)
	}
	if mem, disk, _ := f.m.Pressure(); !mem || disk {
		t.Errorf("pressure %v %v, want memory only", mem, disk)
	}
	if ok, _, _ := f.m.Admit(pod("new-besteffort", 0, 0)); ok {
		t.Error("a BestEffort pod admitted under memory pressure")
	}
	// Recovered: the condition holds for the transition period, then clears; nothing more is evicted.
	f.pods = f.pods[:1]
	f.sum = summaryOf(f.clock.Now(), 600, 50, map[string]uint64{"guaranteed": 150})
	f.clock.Step(30 * time.Second)
	f.sum.Node.Memory.Time = metav1.NewTime(f.clock.Now())
	if f.m.Synchronize(context.Background()) != nil {
		t.Error("evicted after recovery")
	}
	if mem, _, _ := f.m.Pressure(); !mem {
		t.Error("memory pressure cleared before the transition period")
	}
	f.clock.Step(31 * time.Second)
	f.sum.Node.Memory.Time = metav1.NewTime(f.clock.Now())
	f.m.Synchronize(context.Background())
	if mem, _, _ := f.m.Pressure(); mem {
		t.Error("memory pressure held past the transition period")
	}
}

func TestSoftThresholdWaitsForItsGracePeriod(t *testing.T) {
	f := newManager(t, nil, map[string]string{"memory.available": "200Mi"}, map[string]string{"memory.available": "30s"})
	p := pod("p", 0, 0)
	long := int64(60)
	p.Spec.TerminationGracePeriodSeconds = &long
	f.pods = []*v1.Pod{p}
	step := func(d time.Duration) *v1.Pod {
		f.clock.Step(d)
		f.sum = summaryOf(f.clock.Now(), 150, 50, map[string]uint64{"p": 100})
		return f.m.Synchronize(context.Background())
	}
	if step(0) != nil || step(20*time.Second) != nil {
		t.Fatal("evicted before the grace period")
	}
	if mem, _, _ := f.m.Pressure(); !mem {
		t.Error("no memory pressure while a soft threshold is met")
	}
	if step(10*time.Second) == nil {
		t.Fatal("not evicted after the grace period")
	}
	if g := f.evicter.got[0].grace; g != 20 {
		t.Errorf("grace %d, want --eviction-max-pod-grace-period's 20 (the pod asks 60)", g)
	}
}

func TestCriticalPodsAreNotEvicted(t *testing.T) {
	f := newManager(t, map[string]string{"memory.available": "100Mi"}, nil, nil)
	static := pod("static", 0, 0)
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	f.pods = []*v1.Pod{static, pod("crit", 0, 2000000000)}
	f.sum = summaryOf(f.clock.Now(), 10, 50, map[string]uint64{"static": 500, "crit": 400})
	if got := f.m.Synchronize(context.Background()); got != nil {
		t.Errorf("evicted %s", got.Name)
	}
}

func TestDiskPressureReclaimsBeforeEvicting(t *testing.T) {
	f := newManager(t, map[string]string{"nodefs.available": "10%"}, nil, nil)
	f.pods = []*v1.Pod{pod("p", 0, 0)}
	f.sum = summaryOf(f.clock.Now(), 500, 5, nil)
	r := &fakeReclaimer{frees: func() { f.sum = summaryOf(f.clock.Now(), 500, 30, nil) }}
	f.m.cfg.Reclaimer = r
	if got := f.m.Synchronize(context.Background()); got != nil || r.calls != 1 {
		t.Fatalf("evicted %v after %d reclaims; the reclaim freed enough", got, r.calls)
	}
	if _, disk, _ := f.m.Pressure(); !disk {
		t.Error("no disk pressure reported")
	}
	if ok, _, _ := f.m.Admit(pod("q", 100, 0)); ok {
		t.Error("a pod admitted under disk pressure")
	}
	r.frees = nil
	f.sum = summaryOf(f.clock.Now(), 500, 5, nil)
	if got := f.m.Synchronize(context.Background()); got == nil || r.calls != 2 {
		t.Errorf("not evicted when the reclaim freed nothing (%d reclaims)", r.calls)
	}
	if len(f.evicter.got) == 1 && !strings.HasPrefix(f.evicter.got[0].message, "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi") {
		t.Errorf("message %q", f.evicter.got[0].message)
	}
	// A reclaim that fails (the runtime is gone) does not stop the eviction that the pressure needs.
	r.err = errors.New("connection refused")
	f.pods = []*v1.Pod{pod("q", 0, 0)}
	f.clock.Step(time.Minute)
	f.sum = summaryOf(f.clock.Now(), 500, 5, nil)
	if got := f.m.Synchronize(context.Background()); got == nil || got.Name != "q" {
		t.Errorf("after a failed reclaim: evicted %v, want q", got)
	}
}

func TestStaleSummaryIsGatheredAgain(t *testing.T) {
	f := newManager(t, map[string]string{"memory.available": "100Mi"}, nil, nil)
	f.sum = summaryOf(f.clock.Now().Add(-time.Minute), 500, 50, nil)
	gathered := 0
	f.m.cfg.Gather = func(context.Context) {
		gathered++
		f.sum = summaryOf(f.clock.Now(), 500, 50, nil)
	}
	f.m.Synchronize(context.Background())
	f.m.Synchronize(context.Background())
	if gathered != 1 {
		t.Errorf("gathered %d times, want once (for the stale summary only)", gathered)
	}
}

func TestNothingEvictedBeforeTheSourcesSynced(t *testing.T) {
	f := newManager(t, map[string]string{"memory.available": "100Mi"}, nil, nil)
	ready := false
	f.m.cfg.Ready = func() bool { return ready }
	f.pods = []*v1.Pod{pod("p", 0, 0)}
	f.sum = summaryOf(f.clock.Now(), 10, 50, map[string]uint64{"p": 500})
	if got := f.m.Synchronize(context.Background()); got != nil {
		t.Fatalf("evicted %s before the sources synced", got.Name)
	}
	if mem, _, _ := f.m.Pressure(); !mem {
		t.Error("pressure not reported before the sources synced")
	}
	ready = true
	if got := f.m.Synchronize(context.Background()); got == nil {
		t.Error("not evicted once the sources synced")
	}
}

// After an eviction the next observation is a new gathering: the summary that showed the pressure still
// counts the evicted pod's memory, and would evict a second pod for nothing.
func TestNoSecondEvictionOnTheSameSummary(t *testing.T) {
	f := newManager(t, map[string]string{"memory.available": "100Mi"}, nil, nil)
	f.pods = []*v1.Pod{pod("hog", 0, 0), pod("next", 0, 0)}
	f.sum = summaryOf(f.clock.Now(), 50, 50, map[string]uint64{"hog": 800, "next": 10})
	f.m.cfg.Gather = func(context.Context) {
		f.sum = summaryOf(f.clock.Now().Add(time.Millisecond), 600, 50, map[string]uint64{"next": 10})
	}
	if got := f.m.Synchronize(context.Background()); got == nil || got.Name != "hog" {
		t.Fatalf("evicted %v, want hog", got)
	}
	f.pods = f.pods[1:]
	if got := f.m.Synchronize(context.Background()); got != nil {
		t.Errorf("evicted %s on the summary gathered before the first eviction", got.Name)
	}
}

// Once the evicted pod is cleaned up, the next observation is a gathering made after that: one the stats
// collector made between the eviction and the cleanup still counts the pod's memory-backed volume, and would
// evict a second pod for nothing.
func TestNoEvictionOnASummaryFromBeforeTheCleanup(t *testing.T) {
	f := newManager(t, map[string]string{"memory.available": "100Mi"}, nil, nil)
	f.pods = []*v1.Pod{pod("hog", 0, 0), pod("next", 0, 0)}
	f.sum = summaryOf(f.clock.Now(), 50, 50, map[string]uint64{"hog": 800, "next": 10})
	gathered := 0
	f.m.cfg.Gather = func(context.Context) {
		gathered++
		f.sum = summaryOf(f.clock.Now(), 600, 50, map[string]uint64{"next": 10})
	}
	got := f.m.Synchronize(context.Background())
	if got == nil || got.Name != "hog" {
		t.Fatalf("evicted %v, want hog", got)
	}
	// The collector gathers while the hog stops: its tmpfs is still mounted.
	f.clock.Step(time.Second)
	f.sum = summaryOf(f.clock.Now(), 60, 50, map[string]uint64{"next": 10})
	f.clock.Step(time.Second)
	f.m.cfg.Stopped = func(*v1.Pod) bool { return true } // now cleaned up
	f.m.waitGone(context.Background(), got)
	f.pods = f.pods[1:]
	before := gathered
	if got := f.m.Synchronize(context.Background()); got != nil {
		t.Errorf("evicted %s on a summary gathered before the hog was cleaned up", got.Name)
	}
	if gathered != before+1 {
		t.Errorf("gathered %d times after the cleanup, want once", gathered-before)
	}
}
