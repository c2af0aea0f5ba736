package supervisor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// The back-off: 1 s after the first exit, doubling to at most 30 s while the child keeps exiting, and 1 s
// again once it ran ResetAfter (as client-go's and the kubelet's container back-offs reset after a while).
const (
	InitialDelay = time.Second
	MaxDelay     = 30 * time.Second
	ResetAfter   = time.Minute
)

// NextDelay is the wait before the next start, given the wait before the last one (0 for none yet) and how
// long the child then ran (0 for a start that failed).
func NextDelay(prev, ran time.Duration) time.Duration {
	if prev <= 0 || ran >= ResetAfter {
		return InitialDelay
	}
	return min(2*prev, MaxDelay)
}

// Process is a started child.
type Process interface {
	// Done is closed when the process has exited.
	Done() <-chan struct{}
	// Err says how it exited; called after Done is closed.
	Err() error
	// Stop ends it and returns once it has exited.
	Stop(ctx context.Context)
}

// Starter starts a child and returns it once it serves.
type Starter func(ctx context.Context) (Process, error)

// Supervisor restarts a child when it exits. It is safe for concurrent use.
type Supervisor struct {
	name  string
	start Starter
	clock clock.Clock

	mu       sync.Mutex
	cur      Process
	down     error // why the child is not running; nil while it is
	restarts int
}

// New returns a Supervisor of the running child first, which start starts again when it exits; name words
// the child in logs and in Check.
func New(name string, first Process, start Starter, clk clock.Clock) *Supervisor {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Supervisor{name: name, start: start, clock: clk, cur: first}
}

// Run restarts the child each time it exits, until ctx is done. It leaves the child running then: Stop
// stops it, so that its owner keeps it through its own shutdown.
func (s *Supervisor) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	started := s.clock.Now()
	var delay time.Duration
	for {
		s.mu.Lock()
		cur := s.cur
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-cur.Done():
		}
		ran := s.clock.Since(started)
		delay = NextDelay(delay, ran)
		why := cur.Err()
		s.setDown(fmt.Errorf("%s is being restarted: it exited (%v) after running %v; next start in %v", s.name, why, ran.Round(time.Millisecond), delay))
		logger.Error(why, "Child process exited; restarting it; pods keep running and the pod sources keep their last view",
			"child", s.name, "ranFor", ran.Round(time.Millisecond), "restartIn", delay)
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.clock.After(delay):
			}
			p, err := s.start(ctx)
			if ctx.Err() != nil {
				if err == nil {
					s.mu.Lock()
					s.cur = p // Stop ends it
					s.mu.Unlock()
				}
				return
			}
			if err == nil {
				s.mu.Lock()
				s.cur, s.down = p, nil
				s.restarts++
				n := s.restarts
				s.mu.Unlock()
				started = s.clock.Now()
				logger.Info("Child process restarted", "child", s.name, "restarts", n)
				break
			}
			delay = NextDelay(delay, 0)
			s.setDown(fmt.Errorf("%s is being restarted: its start failed (%v); next start in %v", s.name, err, delay))
			logger.Error(err, "Child process failed to start; retrying", "child", s.name, "retryIn", delay)
		}
	}
}

func (s *Supervisor) setDown(err error) {
	s.mu.Lock()
	s.down = err
	s.mu.Unlock()
}

// Stop stops the current child, once Run has returned.
func (s *Supervisor) Stop(ctx context.Context) {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur != nil {
		cur.Stop(ctx)
	}
}

// Check returns nil while the child runs, else why it does not and when it is started again: a health check.
func (s *Supervisor) Check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

// Restarts returns how many times the child was restarted.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}
