package podsync

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/status"
)

var update = flag.Bool("update", false, "rewrite golden files")

// crashLoop drives a pod whose container exits with code 1 one second after each start, except that the
// start numbered longRun runs for 11 minutes. It syncs once a second of fake time and returns the timeline.
func crashLoop(h *harness, pod *v1.Pod, until time.Duration, longRun int) []string {
	var lines []string
	start := h.clock.Now()
	at := func() string { return fmt.Sprintf("%+6ds", int(h.clock.Since(start)/time.Second)) }
	lastWaiting := ""
	starts := 0
	for h.clock.Since(start) <= until {
		if _, err := h.sync(pod); err != nil && !strings.Contains(err.Error(), "back-off") {
			h.t.Fatalf("sync: %v", err)
		}
		for _, e := range h.rec.drain() {
			if strings.Contains(e, " Started ") {
				lines = append(lines, at()+"  started")
			}
		}
		st, _ := h.k.status.PodStatus(pod.UID)
		cs := st.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == status.ReasonCrashLoopBackOff && w.Message != lastWaiting {
			lines = append(lines, fmt.Sprintf("%s  %s: %s (restarts %d)", at(), w.Reason, w.Message, cs.RestartCount))
			lastWaiting = w.Message
		}
		latest := first(h.containers(pod.UID)["app"])
		if latest != nil && latest.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			starts++
			began := h.clock.Now()
			run := time.Second
			if starts == longRun {
				run = 11 * time.Minute
			}
			h.clock.Step(run)
			h.exit(latest.Id, 1, began)
			lines = append(lines, fmt.Sprintf("%s  exited 1 after %v", at(), run))
			continue
		}
		h.clock.Step(time.Second)
	}
	return lines
}

// TestCrashLoopBackOffGolden checks the restart timeline of a crashing container: 10 s doubling to 300 s,
// and a reset after a run of more than 10 minutes.
func TestCrashLoopBackOffGolden(t *testing.T) {
	h := newHarness(t)
	pod := newPod("uid1", "crash", "app")
	lines := crashLoop(h, pod, 40*time.Minute, 9)
	checkGolden(t, "crashloop.golden", strings.Join(lines, "\n")+"\n")
}

// TestBackoffContinuesAcrossRestart checks that a restarted kubelet keeps the back-off of a crashing
// container instead of restarting it at once.
func TestBackoffContinuesAcrossRestart(t *testing.T) {
	h := newHarness(t)
	pod := newPod("uid1", "crash", "app")
	lines := crashLoop(h, pod, 150*time.Second, 0)
	t.Logf("before restart:\n%s", strings.Join(lines, "\n"))
	// Make sure the container is dead now, with restart count n: the next delay is 10s * 2^(n-1).
	latest := first(h.containers(pod.UID)["app"])
	if latest.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		h.clock.Step(time.Second)
		h.exit(latest.Id, 1, h.clock.Now().Add(-time.Second))
	}
	latest = first(h.containers(pod.UID)["app"])
	n := status.RestartCountOf(latest.Annotations)
	want := backoffInitial << (n - 1)

	h.k = h.newKubelet(h.k.cfg.RootDir, h.k.cfg.PodLogsDir)
	finished := time.Unix(0, latest.FinishedAt)
	for h.clock.Since(finished) < want {
		if _, err := h.sync(pod); err != nil {
			t.Fatal(err)
		}
		if first(h.containers(pod.UID)["app"]).Id != latest.Id {
			t.Fatalf("restarted %v after the exit, back-off was %v (restart count %d)", h.clock.Since(finished), want, n)
		}
		h.clock.Step(time.Second)
	}
	if _, err := h.sync(pod); err != nil {
		t.Fatal(err)
	}
	next := first(h.containers(pod.UID)["app"])
	if next.Id == latest.Id || next.Annotations[podfacts.AnnotationContainerRestartCount] != fmt.Sprint(n+1) {
		t.Fatalf("not restarted after the back-off: %v", next)
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run with -update to accept):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// crashLoopBackOff.maxContainerRestartPeriod caps the delays as upstream's KubeletCrashLoopBackOffMax: 10 s
// doubling to the ceiling, or the ceiling from the start when it is shorter than 10 s.
func TestCrashLoopBackOffCeiling(t *testing.T) {
	for _, tc := range []struct {
		max  time.Duration
		want []time.Duration
	}{
		{0, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}},
		{time.Minute, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}},
		{5 * time.Second, []time.Duration{5 * time.Second, 5 * time.Second}},
	} {
		b := newKubeletBackoff(tc.max)
		now := time.Unix(1000, 0)
		for i, want := range tc.want {
			b.Next("c", now)
			if got := b.Remaining("c", now); got != want {
				t.Errorf("max %v: delay %d is %v, want %v", tc.max, i, got, want)
			}
			now = now.Add(time.Second) // the next crash comes soon after the restart
		}
	}
}
