package node

import (
	"errors"
	"sync"
	"time"
)

// Health is what the node agent last found of the node, for the debug page: the Ready condition's failures,
// the runtime's and the network's readiness, and the API server's reach.
type Health struct {
	Failures       []string
	RuntimeMessage string // empty when the runtime is ready
	NetworkMessage string // empty when the network is ready
	APIReachable   bool
	LastLease      time.Time
}

type healthState struct {
	mu sync.Mutex
	h  Health
}

func (s *healthState) setRuntime(failures []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.RuntimeMessage, s.h.NetworkMessage = "", ""
	for _, f := range failures {
		if errors.Is(f, errNetworkNotReady) {
			s.h.NetworkMessage = f.Error()
		} else {
			s.h.RuntimeMessage = f.Error()
		}
	}
}

func (s *healthState) setFailures(failures []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.Failures = s.h.Failures[:0]
	for _, f := range failures {
		s.h.Failures = append(s.h.Failures, f.Error())
	}
}

// setLease records a Lease renewal (at) or a failed one.
func (s *healthState) setLease(ok bool, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.APIReachable = ok
	if ok {
		s.h.LastLease = at
	}
}

// Health returns what the agent last found; it makes no call.
func (a *Agent) Health() Health {
	a.health.mu.Lock()
	defer a.health.mu.Unlock()
	h := a.health.h
	h.Failures = append([]string(nil), h.Failures...)
	return h
}
