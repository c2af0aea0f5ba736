package podsync

import (
	"strings"
	"sync"
	"time"

	"github.com/nodeagent/kubelet/internal/failpoint"
)

// Upstream's numbers: CrashLoopBackOff and ImagePullBackOff start at 10 s and double to 300 s; an entry resets
// when the next event comes more than 10 min after the last one (the container ran that long).
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 300 * time.Second
	backoffReset   = 2 * backoffMax
)

// Backoff holds exponential back-off delays by key. Times are given by the caller; it reads no clock.
// Safe for concurrent use.
type Backoff struct {
	initial, max, reset time.Duration

	mu      sync.Mutex
	entries map[string]backoffEntry
}

type backoffEntry struct {
	delay time.Duration
	last  time.Time // the event time of the last Next
}

// newKubeletBackoff is the back-off of crash loops: upstream's numbers with max as the longest delay
// (crashLoopBackOff.maxContainerRestartPeriod; 0 is 300 s), starting at 10 s or max when shorter, an entry
// reset after twice max, as upstream's KubeletCrashLoopBackOffMax; under the fault suite's
// crash-backoff-max failpoint, that duration at most.
func newKubeletBackoff(max time.Duration) *Backoff {
	if d := failpoint.Duration(failpoint.CrashBackoffMax); d > 0 {
		return NewBackoff(min(backoffInitial, d), d, backoffReset)
	}
	if max <= 0 {
		return NewBackoff(backoffInitial, backoffMax, backoffReset)
	}
	return NewBackoff(min(backoffInitial, max), max, 2*max)
}

// NewBackoff returns a Backoff with the given initial and maximum delays, reset after reset.
func NewBackoff(initial, max, reset time.Duration) *Backoff {
	return &Backoff{initial: initial, max: max, reset: reset, entries: map[string]backoffEntry{}}
}

// InBackoff reports whether an action for key, following an event at eventTime (a container's exit, a failed
// pull), must still wait at now, and for how much longer.
func (b *Backoff) InBackoff(key string, eventTime, now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || eventTime.Sub(e.last) > b.reset {
		return false, 0
	}
	remaining := e.delay - now.Sub(eventTime)
	return remaining > 0, max(remaining, 0)
}

// Next records that the action for key runs now after an event at eventTime, and lengthens the next delay.
func (b *Backoff) Next(key string, eventTime time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || eventTime.Sub(e.last) > b.reset {
		e.delay = b.initial
	} else {
		e.delay = min(e.delay*2, b.max)
	}
	e.last = eventTime
	b.entries[key] = e
}

// Remaining returns how long key still backs off at now, counted from its last Next.
func (b *Backoff) Remaining(key string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return 0
	}
	return max(e.delay-now.Sub(e.last), 0)
}

// Delay returns the current delay of key (0 when none).
func (b *Backoff) Delay(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.entries[key].delay
}

// Seed sets the state of key when it has none: the delay the n-th restart of a crashing container had
// (initial * 2^(n-1), capped), as of eventTime. It lets backoff continue across a kubelet restart.
func (b *Backoff) Seed(key string, restarts int32, eventTime time.Time) {
	if restarts < 1 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.entries[key]; ok {
		return
	}
	d := b.initial
	for i := int32(1); i < restarts && d < b.max; i++ {
		d *= 2
	}
	b.entries[key] = backoffEntry{delay: min(d, b.max), last: eventTime}
}

// DeletePrefix drops every key that starts with prefix.
func (b *Backoff) DeletePrefix(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if strings.HasPrefix(k, prefix) {
			delete(b.entries, k)
		}
	}
}

// GC drops entries whose last event is older than twice the reset period.
func (b *Backoff) GC(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, e := range b.entries {
		if now.Sub(e.last) > 2*b.reset {
			delete(b.entries, k)
		}
	}
}
