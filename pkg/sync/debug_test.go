package podsync

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"
)

func readyStatus(ready bool) *v1.PodStatus {
	s := v1.ConditionFalse
	if ready {
		s = v1.ConditionTrue
	}
	return &v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: s}}}
}

// The timeline's last steps: the first Ready status written, and the API's watch bringing it back; a
// status not Ready, an echo before any write, and later writes add nothing; an echo that comes while the
// write is in flight is kept for it.
func TestDebugStateReadyPostedAndSeen(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testclock.NewFakeClock(t0)
	d := &debugState{clock: clk}
	d.StatusSeen("u", readyStatus(true)) // an echo of someone else's write: nothing posted yet
	d.StatusPosted("u", readyStatus(false), t0, t0.Add(time.Millisecond))
	d.StatusPosted("u", readyStatus(true), t0.Add(time.Second), t0.Add(time.Second+3*time.Millisecond))
	clk.SetTime(t0.Add(time.Second + 10*time.Millisecond))
	d.StatusSeen("u", readyStatus(true))
	d.StatusPosted("u", readyStatus(true), t0.Add(2*time.Second), t0.Add(3*time.Second))
	clk.SetTime(t0.Add(5 * time.Second))
	d.StatusSeen("u", readyStatus(true))

	steps, _, _ := d.snapshot("u")
	if len(steps) != 2 {
		t.Fatalf("steps %+v", steps)
	}
	if s := steps[0]; s.Name != stepReadyPosted || s.Took != 3*time.Millisecond {
		t.Errorf("posted: %+v", s)
	}
	if s := steps[1]; s.Name != stepReadySeen || s.Took != 10*time.Millisecond {
		t.Errorf("seen: %+v", s)
	}

	// The watch brings Ready back before the write that posted it has returned.
	early := &debugState{clock: clk}
	clk.SetTime(t0.Add(10*time.Second + 2*time.Millisecond))
	early.step("e", "admitted", "", t0, t0)
	early.StatusSeen("e", readyStatus(true))
	early.StatusPosted("e", readyStatus(true), t0.Add(10*time.Second), t0.Add(10*time.Second+5*time.Millisecond))
	steps, _, _ = early.snapshot("e")
	if len(steps) != 3 || steps[2].Name != stepReadySeen || steps[2].Took != 2*time.Millisecond {
		t.Errorf("an echo during the write: %+v", steps)
	}

	off := &debugState{off: true, clock: clk}
	off.StatusPosted("u", readyStatus(true), t0, t0)
	off.StatusSeen("u", readyStatus(true))
	if steps, _, _ := off.snapshot("u"); len(steps) != 0 {
		t.Errorf("timelines off recorded %+v", steps)
	}
}
