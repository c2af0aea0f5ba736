package supervisor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestNextDelay(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prev, ran time.Duration
		want      time.Duration
	}{
		{"first exit", 0, 5 * time.Second, time.Second},
		{"first exit after a long run", 0, time.Hour, time.Second},
		{"exits again at once: doubles", time.Second, 0, 2 * time.Second},
		{"keeps exiting", 8 * time.Second, 3 * time.Second, 16 * time.Second},
		{"capped", 16 * time.Second, 0, 30 * time.Second},
		{"stays capped", 30 * time.Second, time.Second, 30 * time.Second},
		{"ran a while: back to 1s", 30 * time.Second, ResetAfter, time.Second},
		{"almost a while: still doubles", 4 * time.Second, ResetAfter - time.Second, 8 * time.Second},
	} {
		if got := NextDelay(tc.prev, tc.ran); got != tc.want {
			t.Errorf("%s: NextDelay(%v, %v) = %v, want %v", tc.name, tc.prev, tc.ran, got, tc.want)
		}
	}
}

type fakeProc struct {
	done    chan struct{}
	once    sync.Once
	err     error
	stopped bool
}

func newProc() *fakeProc { return &fakeProc{done: make(chan struct{})} }

func (p *fakeProc) Done() <-chan struct{} { return p.done }
func (p *fakeProc) Err() error            { return p.err }
func (p *fakeProc) Stop(context.Context)  { p.stopped = true; p.exit(errors.New("stopped")) }
func (p *fakeProc) exit(err error) {
	p.once.Do(func() { p.err = err; close(p.done) })
}

func TestSupervisorRestartsWithBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	first := newProc()
	starts := make(chan *fakeProc, 10)
	var failNext bool
	var mu sync.Mutex
	start := func(ctx context.Context) (Process, error) {
		mu.Lock()
		defer mu.Unlock()
		if failNext {
			failNext = false
			starts <- nil
			return nil, errors.New("listen: address already in use")
		}
		p := newProc()
		starts <- p
		return p, nil
	}
	s := New("the lightweight API server", first, start, clk)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { s.Run(ctx); close(ran) }()

	waitWaiter := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("the supervisor never waited on its clock")
			}
			time.Sleep(time.Millisecond)
		}
	}
	// restartAfter steps the clock to just before delay (no start), then to it (one start).
	restartAfter := func(delay time.Duration) *fakeProc {
		t.Helper()
		waitWaiter()
		clk.Step(delay - time.Millisecond)
		select {
		case <-starts:
			t.Fatalf("started before the back-off of %v passed", delay)
		case <-time.After(20 * time.Millisecond):
		}
		clk.Step(time.Millisecond)
		select {
		case p := <-starts:
			return p
		case <-time.After(5 * time.Second):
			t.Fatalf("not started once the back-off of %v passed", delay)
		}
		return nil
	}

	// The start function hands the process over before the supervisor counts the restart.
	waitRestarts := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); s.Restarts() != n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("restarts %d, want %d", s.Restarts(), n)
			}
		}
	}

	if err := s.Check(); err != nil {
		t.Fatalf("Check while the first child runs: %v", err)
	}
	clk.Step(10 * time.Second)
	first.exit(errors.New("signal: killed"))
	waitWaiter()
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "is being restarted") || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("Check while down: %v", err)
	}
	p := restartAfter(time.Second)
	waitRestarts(1)
	if err := s.Check(); err != nil {
		t.Errorf("after the restart: Check %v", err)
	}
	// Exits again at once: 2 s; then its start fails: 4 s; then it starts.
	p.exit(errors.New("exit status 1"))
	mu.Lock()
	failNext = true
	mu.Unlock()
	if q := restartAfter(2 * time.Second); q != nil {
		t.Fatal("the failing start returned a process")
	}
	waitWaiter()
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Check after a failed start: %v", err)
	}
	p = restartAfter(4 * time.Second)
	// It runs a while: the back-off is 1 s again.
	clk.Step(ResetAfter)
	p.exit(errors.New("signal: killed"))
	p = restartAfter(time.Second)
	waitRestarts(3)

	// Run returns with its context and leaves the child running, for Stop.
	cancel()
	<-ran
	if p.stopped {
		t.Fatal("Run stopped the child")
	}
	s.Stop(context.Background())
	if !p.stopped {
		t.Fatal("Stop did not stop the child")
	}
}
