package prober

import (
	"io"

	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

func TestShouldProbe(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    step
		want bool
	}{
		{"readiness once started", step{typ: Readiness, started: true}, true},
		{"readiness waits for the start", step{typ: Readiness}, false},
		{"liveness waits for the start", step{typ: Liveness}, false},
		{"startup until started", step{typ: Startup}, true},
		{"startup no more once started", step{typ: Startup, started: true}, false},
		{"within the initial delay", step{typ: Readiness, started: true, sinceStart: time.Second, initialDelay: 5 * time.Second}, false},
		{"after the initial delay", step{typ: Readiness, started: true, sinceStart: 5 * time.Second, initialDelay: 5 * time.Second}, true},
		{"on hold after a liveness failure", step{typ: Liveness, started: true, onHold: true}, false},
	} {
		if got := tc.s.shouldProbe(); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}

func TestRunThresholds(t *testing.T) {
	var r run
	seq := []struct {
		o    Outcome
		want bool
	}{
		{Failure, false}, {Failure, false}, {Failure, true}, // failureThreshold 3
		{Success, false}, {Success, true}, // successThreshold 2
		{Failure, false}, {Success, false}, {Success, true}, // a broken run starts again
	}
	for i, s := range seq {
		if got := r.add(s.o, 2, 3); got != s.want {
			t.Errorf("step %d (%v): %v, want %v", i, s.o, got, s.want)
		}
	}
}

// scriptedExec answers each command by what the test set for it.
type scriptedExec struct {
	mu    sync.Mutex
	fails map[string]bool
	calls map[string]int
}

func (s *scriptedExec) set(cmd string, fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[cmd] = fail
}

func (s *scriptedExec) count(cmd string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[cmd]
}

func (s *scriptedExec) ExecSync(_ context.Context, _ string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[cmd[0]]++
	if s.fails[cmd[0]] {
		return []byte(cmd[0] + " says no"), nil, exitErr(1)
	}
	return nil, nil, nil
}

type recordedEvents struct {
	mu  sync.Mutex
	all []string
}

func (r *recordedEvents) Event(_ *v1.Pod, container, _, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, container+" "+reason+" "+message)
}

func execProbe(cmd string, failureThreshold int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: failureThreshold}
}

func waitFor(t *testing.T, clk *testclock.FakeClock, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 400; i++ {
		if cond() {
			return
		}
		if i%20 == 19 {
			clk.Step(time.Second) // the workers are waiting on their tickers
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: never", what)
}

// A container with startup, liveness and readiness probes: not started until its startup probe succeeds
// (liveness and readiness wait), then ready while its readiness probe succeeds; a liveness failure past its
// threshold is reported once, and the worker holds until the next instance.
func TestManagerProbesAContainer(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1_000_000, 0))
	ex := &scriptedExec{fails: map[string]bool{"startup": true}, calls: map[string]int{}}
	ev := &recordedEvents{}
	changed := make(chan types.UID, 100)
	m := New(Config{Exec: ex, Events: ev, Clock: clk, OnChange: func(uid types.UID) { changed <- uid }})
	defer m.Stop()

	c := &v1.Container{Name: "app", StartupProbe: execProbe("startup", 100), LivenessProbe: execProbe("live", 2),
		ReadinessProbe: execProbe("ready", 1)}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{*c}}}
	m.Sync(pod, "10.88.0.2", []Running{{Spec: c, ID: "c1", StartedAt: clk.Now()}})
	if m.Workers() != 3 {
		t.Fatalf("%d workers, want 3", m.Workers())
	}

	waitFor(t, clk, "the startup probe runs", func() bool { return ex.count("startup") >= 2 })
	if m.Started("u1", c, "c1") || m.Ready("u1", c, "c1") || ex.count("live")+ex.count("ready") != 0 {
		t.Fatalf("before the startup probe passed: started %v ready %v, liveness %d and readiness %d runs",
			m.Started("u1", c, "c1"), m.Ready("u1", c, "c1"), ex.count("live"), ex.count("ready"))
	}
	ex.set("startup", false)
	waitFor(t, clk, "started and ready", func() bool { return m.Started("u1", c, "c1") && m.Ready("u1", c, "c1") })

	ex.set("ready", true)
	waitFor(t, clk, "not ready once readiness fails", func() bool { return !m.Ready("u1", c, "c1") })
	if _, failed := m.Failed("u1", c, "c1"); failed {
		t.Fatal("a readiness failure counted as a liveness one")
	}

	ex.set("live", true)
	waitFor(t, clk, "the liveness failure", func() bool { typ, failed := m.Failed("u1", c, "c1"); return failed && typ == Liveness })
	held := ex.count("live")
	for i := 0; i < 5; i++ {
		clk.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	if ex.count("live") != held {
		t.Errorf("the liveness probe ran on after failing: %d -> %d", held, ex.count("live"))
	}
	ev.mu.Lock()
	var unhealthy bool
	for _, e := range ev.all {
		unhealthy = unhealthy || e == "app Unhealthy Liveness probe failed: live says no"
	}
	ev.mu.Unlock()
	if !unhealthy {
		t.Errorf("no Unhealthy event with the output: %v", ev.all)
	}
	if len(changed) == 0 {
		t.Error("no change was reported")
	}

	var buf strings.Builder
	writeMetrics(t, m, &buf)
	for _, want := range []string{
		`prober_probe_total{container="app",namespace="ns",pod="p",pod_uid="u1",probe_type="Startup",result="failed"} `,
		`prober_probe_total{container="app",namespace="ns",pod="p",pod_uid="u1",probe_type="Liveness",result="failed"} `,
		`prober_probe_duration_seconds_bucket{container="app",namespace="ns",pod="p",probe_type="Readiness",le="+Inf"} `,
		"# TYPE prober_probe_duration_seconds histogram\n",
		"# TYPE prober_probe_start_lateness_seconds histogram\n",
		`prober_probe_start_lateness_seconds_bucket{le="0.0005"} `,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), "prober_probe_start_lateness_seconds_count 0\n") {
		t.Errorf("no probe's lateness was counted:\n%s", buf.String())
	}
	var lastLiveness State
	for _, st := range m.States("u1") {
		if st.Type == Liveness {
			lastLiveness = st
		}
	}
	if lastLiveness.Result != "failed" || lastLiveness.Output != "live says no" || lastLiveness.ContainerID != "c1" {
		t.Errorf("last liveness state %+v", lastLiveness)
	}

	// The next instance starts over; a removed pod leaves no worker and no result.
	ex.set("live", false)
	m.Sync(pod, "10.88.0.2", []Running{{Spec: c, ID: "c2", StartedAt: clk.Now()}})
	if _, failed := m.Failed("u1", c, "c2"); failed || m.Started("u1", c, "c2") {
		t.Error("the new instance inherited results")
	}
	m.RemovePod("u1")
	if m.Workers() != 0 {
		t.Errorf("%d workers after RemovePod", m.Workers())
	}
	buf.Reset()
	writeMetrics(t, m, &buf)
	if strings.Contains(buf.String(), `pod="p"`) || len(m.States("u1")) != 0 {
		t.Errorf("a removed pod's series remain:\n%s", buf.String())
	}
}

// Many probed containers come and go: their workers end with them.
func TestManagerWorkersEnd(t *testing.T) {
	before := runtime.NumGoroutine()
	m := New(Config{Exec: &scriptedExec{fails: map[string]bool{}, calls: map[string]int{}}, Events: &recordedEvents{}})
	defer m.Stop()
	c := &v1.Container{Name: "app", LivenessProbe: execProbe("live", 3), ReadinessProbe: execProbe("ready", 3)}
	var uids []types.UID
	for i := 0; i < 100; i++ {
		uid := types.UID(fmt.Sprintf("u%d", i))
		uids = append(uids, uid)
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: uid}}
		m.Sync(pod, "127.0.0.1", []Running{{Spec: c, ID: "c", StartedAt: time.Now()}})
	}
	if m.Workers() != 200 {
		t.Fatalf("%d workers", m.Workers())
	}
	for _, uid := range uids {
		m.RemovePod(uid)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Errorf("%d goroutines after the pods went, %d before", n, before)
	}
}

// writeMetrics writes the manager's series in Prometheus' text format.
func writeMetrics(t *testing.T, m *Manager, w io.Writer) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			t.Fatal(err)
		}
	}
}
