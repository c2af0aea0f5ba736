package pleg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/metrics"
)

// Upstream's numbers.
const (
	RelistPeriod       = time.Second
	RelistThreshold    = 3 * time.Minute
	EventChannelLength = 1000
)

// Runtime is the part of the CRI runtime service the PLEG reads.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
}

// Options are the optional parts of a PLEG.
type Options struct {
	// RuntimeEvents, when set, carries container events from the runtime; each triggers an immediate relist of
	// the pod it names.
	RuntimeEvents <-chan *runtimeapi.ContainerEventResponse
	// Enrich, when set, is called on every container status the PLEG inspects before it is cached (the kubelet
	// fills in termination messages there). It must not block for long.
	Enrich func(*runtimeapi.ContainerStatus)
	// InspectTimeout bounds one pod's inspection by a full relist (DefaultInspectTimeout when 0): a pod whose
	// runtime call has not returned by then is left out of the relist, keeps its last record, is listed by
	// Stuck, and is not inspected again until the call returns. One hung call never stalls the relist, so it
	// cannot make the node NotReady.
	InspectTimeout time.Duration
}

// PLEG relists the runtime and produces events and the pod cache. Relist, RelistPod, Healthy and Watch are
// safe for concurrent use; Run is its loop.
type PLEG struct {
	runtime Runtime
	clock   clock.WithTicker
	opts    Options
	cache   *Cache
	events  chan *Event

	// relistMu serializes full relists. mu guards the recording of every read, and what follows: relists,
	// full or of a single pod, read the runtime without it, then record what they read only when no newer
	// read of that pod was recorded meanwhile.
	relistMu    sync.Mutex
	mu          sync.Mutex
	last        Snapshot
	reinspect   map[types.UID]bool
	relistStart time.Time               // when the last recorded full relist began reading
	podRead     map[types.UID]time.Time // when the last recorded read of a single pod began
	recorded    uint64                  // counts single-pod records
	podRecorded map[types.UID]uint64    // the count at each pod's last single-pod record

	healthMu    sync.Mutex
	lastRelist  time.Time
	lastTook    time.Duration
	lastErr     error     // why the last relist failed; nil after a success
	calling     string    // the runtime call a relist waits on, for Healthy's message
	callingFrom time.Time // when it was made

	stuckMu sync.Mutex
	stuck   map[types.UID]StuckPod // inspections still out after InspectTimeout
}

// New returns a PLEG reading rt.
func New(rt Runtime, clk clock.WithTicker, opts Options) *PLEG {
	return &PLEG{
		runtime:     rt,
		clock:       clk,
		opts:        opts,
		cache:       NewCache(),
		events:      make(chan *Event, EventChannelLength),
		last:        Snapshot{},
		reinspect:   map[types.UID]bool{},
		podRead:     map[types.UID]time.Time{},
		podRecorded: map[types.UID]uint64{},
		stuck:       map[types.UID]StuckPod{},
	}
}

// Watch returns the channel of events. There is one channel; events are dropped (and logged) when it is full.
func (p *PLEG) Watch() <-chan *Event { return p.events }

// Cache returns the pod cache the PLEG fills.
func (p *PLEG) Cache() *Cache { return p.cache }

// Run relists every RelistPeriod, and relists single pods on runtime events, until ctx is done.
func (p *PLEG) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if err := p.Relist(ctx); err != nil && ctx.Err() == nil {
		logger.Error(err, "Relist failed")
	}
	ticker := p.clock.NewTicker(RelistPeriod)
	defer ticker.Stop()
	runtimeEvents := p.opts.RuntimeEvents
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			if err := p.Relist(ctx); err != nil && ctx.Err() == nil {
				logger.Error(err, "Relist failed")
			}
		case ev, ok := <-runtimeEvents:
			if !ok {
				runtimeEvents = nil // the stream ended; the periodic relist carries on
				continue
			}
			p.handleRuntimeEvents(ctx, logger, ev, runtimeEvents)
		}
	}
}

// handleRuntimeEvents relists each pod named by ev and the events already queued behind it, once each.
func (p *PLEG) handleRuntimeEvents(ctx context.Context, logger klog.Logger, ev *runtimeapi.ContainerEventResponse, ch <-chan *runtimeapi.ContainerEventResponse) {
	uids := map[types.UID]bool{}
	full := false
	add := func(ev *runtimeapi.ContainerEventResponse) {
		uid := types.UID(ev.GetPodSandboxStatus().GetMetadata().GetUid())
		if uid == "" {
			uid = types.UID(ev.GetPodSandboxStatus().GetLabels()[LabelPodUID])
		}
		if uid == "" {
			full = true
			return
		}
		uids[uid] = true
	}
	add(ev)
	for more := true; more && len(uids) < 64; {
		select {
		case ev, ok := <-ch:
			if !ok {
				more = false
				break
			}
			add(ev)
		default:
			more = false
		}
	}
	if full {
		if err := p.Relist(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Relist failed")
		}
		return
	}
	for uid := range uids {
		if err := p.RelistPod(ctx, uid); err != nil && ctx.Err() == nil {
			logger.Error(err, "Pod relist failed", "podUID", uid)
		}
	}
}

// Relist lists the whole runtime once, updates the cache and sends the events. It reads and inspects without
// holding p.mu, so that single-pod relists (a pod worker's, after it changed its pod) record and send their
// events meanwhile; a pod read by one of those after this relist began keeps that newer read.
func (p *PLEG) Relist(ctx context.Context) error {
	p.relistMu.Lock()
	defer p.relistMu.Unlock()
	start := p.clock.Now()
	p.call("ListPodSandbox")
	sandboxes, err := p.runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return p.relistFailed(fmt.Errorf("list pod sandboxes: %w", err))
	}
	p.call("ListContainers")
	containers, err := p.runtime.ListContainers(ctx, nil)
	p.call("")
	if err != nil {
		return p.relistFailed(fmt.Errorf("list containers: %w", err))
	}
	cur := BuildSnapshot(sandboxes, containers)

	p.mu.Lock()
	seen := p.recorded
	byPod := map[types.UID][]Event{}
	for _, e := range ComputeEvents(p.last, cur) {
		byPod[e.UID] = append(byPod[e.UID], e)
	}
	changed := map[types.UID]bool{}
	for uid := range byPod {
		changed[uid] = true
	}
	for uid := range p.reinspect {
		changed[uid] = true
	}
	p.mu.Unlock()
	inspected := p.inspectAll(ctx, changed, cur, sandboxes, containers)

	// Record. A pod neither inspected nor recorded meanwhile by a single-pod relist is as the last relist
	// left it: nothing to do.
	p.mu.Lock()
	var events []Event
	todo := maps.Clone(changed)
	for uid, n := range p.podRecorded {
		if n > seen {
			todo[uid] = true
		}
	}
	for uid := range todo {
		if start.Before(p.podRead[uid]) {
			continue // a single-pod relist read it after this one began: its record and events stand
		}
		res, ok := inspected[uid]
		if !ok && changed[uid] && p.isStuck(uid) {
			p.reinspect[uid] = true // its last record stands; it is read again once its call returns
			continue
		}
		if p.podRecorded[uid] > seen {
			// A single-pod relist that began before this one recorded the pod while this one inspected: which
			// of the two listings is newer is unknown. Record a state read after this relist began (the cache
			// time below must not cover an older one), send no event, keep that relist's view, and look again
			// at the next relist.
			if !ok {
				if res, ok = p.inspectAll(ctx, map[types.UID]bool{uid: true}, cur, sandboxes, containers)[uid]; !ok {
					p.reinspect[uid] = true // stuck: its last record stands
					continue
				}
			}
			p.record(ctx, uid, res.state, res.err, start)
			p.reinspect[uid] = true
			continue
		}
		if p.record(ctx, uid, res.state, res.err, start) {
			continue // failed: its old record stays, so that its events come again at the next relist
		}
		if r, in := cur[uid]; in {
			p.last[uid] = r
		} else {
			delete(p.last, uid)
		}
		events = append(events, byPod[uid]...)
	}
	p.cache.UpdateTime(start)
	p.relistStart = start
	for uid, at := range p.podRead {
		if !start.Before(at) {
			delete(p.podRead, uid) // read before this relist: older than it
		}
	}
	clear(p.podRecorded) // only records made while a later relist inspects matter to it
	p.mu.Unlock()
	p.send(ctx, events)

	p.healthMu.Lock()
	prev := p.lastRelist
	p.lastRelist, p.lastErr = start, nil
	p.lastTook = p.clock.Since(start)
	took := p.lastTook
	p.healthMu.Unlock()
	observeRelist(start, prev, took, sandboxes, containers)
	return nil
}

// relistFailed remembers why the last relist failed, for Healthy's message.
func (p *PLEG) relistFailed(err error) error {
	p.healthMu.Lock()
	p.lastErr, p.calling = err, ""
	p.healthMu.Unlock()
	return err
}

// call notes the runtime call a relist is about to wait on ("" once it returned).
func (p *PLEG) call(name string) {
	p.healthMu.Lock()
	p.calling, p.callingFrom = name, p.clock.Now()
	p.healthMu.Unlock()
}

// observeRelist records a relist in the kubelet's metrics: its duration, the interval since the previous one,
// when it ran, and the running pods (ready sandboxes) and containers by state that it listed.
func observeRelist(start, prev time.Time, took time.Duration, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	metrics.PLEGRelistDuration.Observe(took.Seconds())
	if !prev.IsZero() {
		metrics.PLEGRelistInterval.Observe(start.Sub(prev).Seconds())
	}
	metrics.PLEGLastSeen.Set(float64(start.UnixNano()) / 1e9)
	running := 0
	for _, sb := range sandboxes {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			running++
		}
	}
	metrics.RunningPods.Set(float64(running))
	byState := map[string]int{"running": 0, "exited": 0, "created": 0, "unknown": 0}
	for _, c := range containers {
		switch c.GetState() {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			byState["running"]++
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			byState["exited"]++
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			byState["created"]++
		default:
			byState["unknown"]++
		}
	}
	for state, n := range byState {
		metrics.RunningContainers.WithLabelValues(state).Set(float64(n))
	}
}

// inspectResult is one pod's inspection by a full relist.
type inspectResult struct {
	state *PodState // nil: the runtime has nothing of the pod
	err   error
}

// RelistPod lists and inspects one pod now, updates the cache and sends its events. Pod workers call it after
// changing a pod, and runtime events trigger it. Relists of different pods run in parallel; a read older than
// one already recorded for the pod (or than the last full relist) is dropped.
func (p *PLEG) RelistPod(ctx context.Context, uid types.UID) error {
	start := p.clock.Now()
	selector := map[string]string{LabelPodUID: string(uid)}
	sandboxes, err := p.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	containers, err := p.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	mine := Snapshot{}
	if r, ok := BuildSnapshot(sandboxes, containers)[uid]; ok {
		mine[uid] = r
	}
	var state *PodState
	var inspectErr error
	if rec, ok := mine[uid]; ok {
		r, ok := p.inspectBounded(ctx, uid, rec, sandboxes, containers)
		if !ok {
			return nil // stuck: its last record stands until its call returns
		}
		state, inspectErr = r.state, r.err
	}

	p.mu.Lock()
	if start.Before(p.relistStart) || start.Before(p.podRead[uid]) {
		p.mu.Unlock()
		return nil // a newer read of this pod is already recorded
	}
	p.podRead[uid] = start
	p.recorded++
	p.podRecorded[uid] = p.recorded
	old := Snapshot{}
	if r, ok := p.last[uid]; ok {
		old[uid] = r
	}
	events := ComputeEvents(old, mine)
	failed := p.record(ctx, uid, state, inspectErr, start)
	if r, ok := mine[uid]; ok && !failed {
		p.last[uid] = r
	} else if !ok {
		delete(p.last, uid)
	}
	p.mu.Unlock()
	if !failed { // else they come again at the next relist, against the old record kept
		p.send(ctx, events)
	}
	return nil
}

// record puts what an inspection of uid found (state nil: nothing in the runtime) into the cache and reports
// whether the inspection failed, in which case the next relist inspects the pod again. p.mu must be held.
func (p *PLEG) record(ctx context.Context, uid types.UID, state *PodState, err error, ts time.Time) bool {
	if state == nil && err == nil {
		p.cache.Delete(uid)
		delete(p.reinspect, uid)
		return false
	}
	p.cache.Set(uid, state, err, ts)
	if err != nil {
		p.reinspect[uid] = true
		klog.FromContext(ctx).V(2).Info("Pod inspection failed, retrying at the next relist", "podUID", uid, "err", err)
		return true
	}
	delete(p.reinspect, uid)
	return false
}

// inspect reads the full CRI status of every sandbox and container of one pod.
func (p *PLEG) inspect(ctx context.Context, uid types.UID, rec PodRecord, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) (*PodState, error) {
	state := &PodState{UID: uid, SandboxOf: map[string]string{}}
	var errs []error
	for _, s := range sandboxes {
		if s == nil || rec[s.Id] == StateNonExistent || sandboxUID(s) != uid {
			continue
		}
		resp, err := p.runtime.PodSandboxStatus(ctx, s.Id, false)
		if err != nil || resp.GetStatus() == nil {
			errs = append(errs, fmt.Errorf("sandbox %s status: %w", s.Id, errOrEmpty(err)))
			continue
		}
		state.Sandboxes = append(state.Sandboxes, resp.Status)
		if state.Name == "" {
			state.Name = s.GetMetadata().GetName()
			state.Namespace = s.GetMetadata().GetNamespace()
		}
	}
	for _, c := range containers {
		if c == nil {
			continue
		}
		if _, ok := rec[c.Id]; !ok {
			continue
		}
		resp, err := p.runtime.ContainerStatus(ctx, c.Id, false)
		if err != nil || resp.GetStatus() == nil {
			errs = append(errs, fmt.Errorf("container %s status: %w", c.Id, errOrEmpty(err)))
			continue
		}
		st := resp.Status
		if st.Labels == nil {
			st.Labels = c.Labels
		}
		if st.Annotations == nil {
			st.Annotations = c.Annotations
		}
		if p.opts.Enrich != nil && st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			p.opts.Enrich(st)
		}
		state.Containers = append(state.Containers, st)
		state.SandboxOf[c.Id] = c.PodSandboxId
		if state.Name == "" {
			state.Name = c.Labels[LabelPodName]
			state.Namespace = c.Labels[LabelPodNamespace]
		}
	}
	return state, errors.Join(errs...)
}

func errOrEmpty(err error) error {
	if err != nil {
		return err
	}
	return errors.New("empty status")
}

// send delivers events without blocking; ContainerChanged is not sent (no consumer acts on it, as upstream).
// Callers leave out the events of pods whose inspection failed: those come again after the next relist.
func (p *PLEG) send(ctx context.Context, events []Event) {
	for i := range events {
		e := events[i]
		if e.Type == ContainerChanged {
			continue
		}
		select {
		case p.events <- &e:
		default:
			klog.FromContext(ctx).Info("PLEG event channel is full, dropping event", "podUID", e.UID, "event", e.Type)
		}
	}
}

// Healthy returns an error when no relist has succeeded within RelistThreshold.
func (p *PLEG) Healthy() error {
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	var msg string
	switch since := p.clock.Since(p.lastRelist); {
	case p.lastRelist.IsZero():
		msg = "pleg has yet to be successful"
	case since > RelistThreshold:
		msg = fmt.Sprintf("pleg was last seen active %v ago; threshold is %v", since, RelistThreshold)
	default:
		return nil
	}
	// Why, as precisely as known: the call it waits on, or its last error; and the pods it cannot read.
	if p.calling != "" && p.clock.Since(p.callingFrom) >= time.Second {
		msg += fmt.Sprintf("; the runtime's %s call has not returned for %v", p.calling, p.clock.Since(p.callingFrom).Round(time.Second))
	} else if p.lastErr != nil {
		msg += fmt.Sprintf("; the last relist failed: %v", p.lastErr)
	}
	stuck := p.Stuck()
	sort.Slice(stuck, func(i, j int) bool { return stuck[i].Since.Before(stuck[j].Since) })
	for _, s := range stuck {
		msg += fmt.Sprintf("; the inspection of pod %s/%s has not returned for %v", s.Namespace, s.Name, p.clock.Since(s.Since).Round(time.Second))
	}
	return errors.New(msg)
}

// LastRelist returns when the last successful full relist started and how long it took.
func (p *PLEG) LastRelist() (time.Time, time.Duration) {
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	return p.lastRelist, p.lastTook
}
