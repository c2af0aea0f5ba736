package prober

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Type is the kind of a probe.
type Type string

// The probe types, named as upstream's events name them.
const (
	Liveness  Type = "Liveness"
	Readiness Type = "Readiness"
	Startup   Type = "Startup"
)

// SpecOf is the container's probe of type t (nil without one).
func SpecOf(c *v1.Container, t Type) *v1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	case Startup:
		return c.StartupProbe
	}
	return nil
}

// initial is a probe's result before it has one, as upstream's: not ready, alive, not started.
func initial(t Type) Outcome {
	switch t {
	case Liveness:
		return Success
	case Readiness:
		return Failure
	}
	return Unknown
}

// Running is a running container as the sync loop sees it.
type Running struct {
	Spec      *v1.Container
	ID        string
	StartedAt time.Time
}

// step is the pure decision of one tick of a worker: whether to probe now.
type step struct {
	onHold       bool
	sinceStart   time.Duration
	initialDelay time.Duration
	typ          Type
	started      bool // the container's startup probe succeeded, or it has none
}

// shouldProbe decides, as upstream's worker does, whether a tick probes: not while on hold (a liveness or
// startup failure waits for the next container), not within initialDelaySeconds, liveness and readiness
// only once the container has started, startup only until it has.
func (s step) shouldProbe() bool {
	switch {
	case s.onHold, s.sinceStart < s.initialDelay:
		return false
	case s.typ == Startup:
		return !s.started
	}
	return s.started
}

// run counts a result into the run of equal results, and reports whether the result changes: only after
// successThreshold successes or failureThreshold failures in a row, as upstream's.
type run struct {
	last Outcome
	n    int
}

func (r *run) add(o Outcome, successThreshold, failureThreshold int32) bool {
	if o == r.last && r.n > 0 {
		r.n++
	} else {
		r.last, r.n = o, 1
	}
	if o == Failure && r.n < int(max(failureThreshold, 1)) || o == Success && r.n < int(max(successThreshold, 1)) {
		return false
	}
	return true
}

// worker probes one probe of one container instance until stopped.
type worker struct {
	m         *Manager
	pod       *v1.Pod
	container *v1.Container
	typ       Type
	id        string
	startedAt time.Time
	podIP     atomic.Pointer[string]
	stop      chan struct{}
	stopOnce  sync.Once
	trigger   chan struct{}
}

func (w *worker) halt() { w.stopOnce.Do(func() { close(w.stop) }) }

func (w *worker) run(ctx context.Context) {
	defer w.m.wg.Done()
	spec := SpecOf(w.container, w.typ)
	period := time.Duration(max(spec.PeriodSeconds, 1)) * time.Second
	// A kubelet that has just started finds every container running: spread their first probes over a
	// period, as upstream does, instead of probing them all at once.
	if w.m.clock.Since(w.m.start) < period {
		select {
		case <-w.m.clock.After(time.Duration(rand.Float64() * float64(period))):
		case <-w.stop:
			return
		}
	}
	ticker := w.m.clock.NewTicker(period)
	defer ticker.Stop()
	var (
		r      run
		onHold bool
		due    time.Time // when the tick that woke the worker was due (zero for the first probe and triggers)
	)
	logger := klog.FromContext(ctx)
	for {
		s := step{onHold: onHold, sinceStart: w.m.clock.Since(w.startedAt),
			initialDelay: time.Duration(spec.InitialDelaySeconds) * time.Second, typ: w.typ,
			started: w.m.startedID(w.pod.UID, w.container, w.id)}
		if s.shouldProbe() {
			if !due.IsZero() {
				late := w.m.clock.Since(due)
				w.m.late(late)
				if logger.V(4).Enabled() {
					logger.V(4).Info("Probe started", "probeType", w.typ, "pod", klog.KObj(w.pod), "containerName", w.container.Name, "late", late)
				}
			}
			o, ok := w.probe(ctx, spec)
			if ok && r.add(o, spec.SuccessThreshold, spec.FailureThreshold) {
				w.m.set(w, o)
				if o == Failure && w.typ != Readiness {
					onHold, r = true, run{} // the container will be restarted: wait for the next one
				}
			}
		}
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case due = <-ticker.C():
		case <-w.trigger:
			due = time.Time{}
		}
	}
}

// probe runs the probe once (again, up to 3 times, when it errs), records its events, and returns a
// success for a warning. ok is false when every try erred: the result is thrown away, as upstream does.
func (w *worker) probe(ctx context.Context, spec *v1.Probe) (Outcome, bool) {
	timeout := time.Duration(max(spec.TimeoutSeconds, 1)) * time.Second
	var (
		o   Outcome
		out string
		err error
	)
	start := w.m.clock.Now()
	for try := 0; try < 3; try++ {
		if o, out, err = w.m.run(ctx, w, spec, timeout); err == nil {
			break
		}
	}
	w.m.observe(w, o, out, err, w.m.clock.Since(start))
	logger := klog.FromContext(ctx).WithValues("probeType", w.typ, "pod", klog.KObj(w.pod), "containerName", w.container.Name)
	switch {
	case err != nil:
		logger.V(1).Info("Probe errored", "err", err)
		w.m.events.Event(w.pod, w.container.Name, v1.EventTypeWarning, "Unhealthy",
			fmt.Sprintf("%s probe errored and resulted in unknown state: %s", w.typ, err))
		return Failure, false
	case o == Warning:
		w.m.events.Event(w.pod, w.container.Name, v1.EventTypeWarning, "ProbeWarning", fmt.Sprintf("%s probe warning: %s", w.typ, out))
		return Success, true
	case o == Failure, o == Unknown:
		logger.V(1).Info("Probe failed", "output", out)
		w.m.events.Event(w.pod, w.container.Name, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", w.typ, out))
		return Failure, true
	}
	logger.V(3).Info("Probe succeeded")
	return Success, true
}
