package prober

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Events records events about a pod's container.
type Events interface {
	Event(pod *v1.Pod, container, eventType, reason, message string)
}

// Config is what the manager needs.
type Config struct {
	// Exec runs exec probes (the runtime's ExecSync).
	Exec   Execer
	Events Events
	Clock  clock.WithTicker
	// OnChange is called, from a worker, when a probe's result changes: the pod needs a sync.
	OnChange func(types.UID)
}

type key struct {
	uid       types.UID
	container string
	typ       Type
}

// result is a probe's current result for one container instance.
type result struct {
	id      string
	outcome Outcome
}

// Count is how often a probe of a container ended one way, for prober_probe_total.
type Count struct {
	Pod, Namespace, Container string
	PodUID                    types.UID
	Type                      Type
	Result                    string // successful, failed or unknown
}

// Manager runs the probes of the node's running containers. It is safe for concurrent use.
type Manager struct {
	cfg    Config
	clock  clock.WithTicker
	events Events
	start  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	workers   map[key]*worker
	results   map[key]result
	counts    map[Count]uint64
	durations map[durationKey]*histogram
	lateness  histogram // how late probes start after their tick, node-wide
	last      map[key]State
}

// State is the last result of a probe of a container, for the debug page.
type State struct {
	Container   string
	Type        Type
	ContainerID string
	Result      string // successful, failed or unknown
	Output      string
	At          time.Time
}

// New returns a manager; Stop ends its workers.
func New(cfg Config) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func(types.UID) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{cfg: cfg, clock: cfg.Clock, events: cfg.Events, start: cfg.Clock.Now(), ctx: ctx, cancel: cancel,
		workers: map[key]*worker{}, results: map[key]result{}, counts: map[Count]uint64{},
		durations: map[durationKey]*histogram{}, lateness: histogram{bounds: lateBuckets}, last: map[key]State{}}
}

// restartGrace: a container that started this long before the manager is one a restarted kubelet adopts.
const restartGrace = 10 * time.Second

// Sync makes the pod's workers match its running containers: a worker for each probe of each running
// container (a new one for a new instance), none for the others. podIP is where HTTP, TCP and gRPC probes
// go unless they name a host. A restarted kubelet keeps the pod Ready while it first probes the containers
// it adopts, when the API says the pod was Ready, as upstream does.
func (m *Manager) Sync(pod *v1.Pod, podIP string, running []Running) {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[key]Running{}
	for _, r := range running {
		for _, t := range []Type{Startup, Liveness, Readiness} {
			if SpecOf(r.Spec, t) != nil {
				want[key{pod.UID, r.Spec.Name, t}] = r
			}
		}
	}
	for k, w := range m.workers {
		if k.uid != pod.UID {
			continue
		}
		if r, ok := want[k]; ok && r.ID == w.id {
			w.podIP.Store(&podIP)
			delete(want, k)
			continue
		}
		w.halt()
		delete(m.workers, k)
	}
	for k, r := range want {
		w := &worker{m: m, pod: pod, container: r.Spec, typ: k.typ, id: r.ID, startedAt: r.StartedAt,
			stop: make(chan struct{}), trigger: make(chan struct{}, 1)}
		w.podIP.Store(&podIP)
		m.workers[k] = w
		if cur, ok := m.results[k]; !ok || cur.id != r.ID {
			o := initial(k.typ)
			if r.StartedAt.Before(m.start.Add(-restartGrace)) && podReady(pod) {
				o = Success // adopted: it had started and was ready before this kubelet
			}
			m.results[k] = result{id: r.ID, outcome: o}
		}
		m.wg.Add(1)
		go w.run(m.ctx)
	}
}

// RemovePod stops the pod's workers and forgets its results (the pod is stopping or gone).
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if k.uid == uid {
			w.halt()
			delete(m.workers, k)
		}
	}
	for k := range m.results {
		if k.uid == uid {
			delete(m.results, k)
		}
	}
	for c := range m.counts {
		if c.PodUID == uid {
			delete(m.counts, c)
			delete(m.durations, durationKey{Type: c.Type, Container: c.Container, Pod: c.Pod, Namespace: c.Namespace})
		}
	}
	for k := range m.last {
		if k.uid == uid {
			delete(m.last, k)
		}
	}
}

// Stop ends every worker and waits for them.
func (m *Manager) Stop() {
	m.cancel()
	m.mu.Lock()
	for _, w := range m.workers {
		w.halt()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// Workers is how many probe workers run.
func (m *Manager) Workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.workers)
}

func (m *Manager) outcome(uid types.UID, c *v1.Container, id string, t Type) (Outcome, bool) {
	r, ok := m.results[key{uid, c.Name, t}]
	if !ok || r.id != id {
		return Unknown, false
	}
	return r.outcome, true
}

func (m *Manager) startedID(uid types.UID, c *v1.Container, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.startedLocked(uid, c, id)
}

func (m *Manager) startedLocked(uid types.UID, c *v1.Container, id string) bool {
	if c.StartupProbe == nil {
		return true
	}
	o, ok := m.outcome(uid, c, id, Startup)
	return ok && o == Success
}

// Started reports whether the running container instance id has started: its startup probe succeeded, or
// it has none.
func (m *Manager) Started(uid types.UID, c *v1.Container, id string) bool {
	return m.startedID(uid, c, id)
}

// Ready reports whether the running container instance id is ready: started, and its readiness probe
// succeeded (or it has none).
func (m *Manager) Ready(uid types.UID, c *v1.Container, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.startedLocked(uid, c, id) {
		return false
	}
	if c.ReadinessProbe == nil {
		return true
	}
	o, ok := m.outcome(uid, c, id, Readiness)
	return ok && o == Success
}

// Failed reports whether the container instance id failed its liveness or startup probe, and which: the
// sync kills it.
func (m *Manager) Failed(uid types.UID, c *v1.Container, id string) (Type, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range []Type{Liveness, Startup} {
		if o, ok := m.outcome(uid, c, id, t); ok && o == Failure {
			return t, true
		}
	}
	return "", false
}

// set records a worker's new result; a change asks for a sync of the pod, and a startup success wakes the
// container's other probes at once.
func (m *Manager) set(w *worker, o Outcome) {
	k := key{w.pod.UID, w.container.Name, w.typ}
	m.mu.Lock()
	if cur, ok := m.workers[k]; !ok || cur != w {
		m.mu.Unlock()
		return // stopped meanwhile
	}
	changed := m.results[k] != result{id: w.id, outcome: o}
	m.results[k] = result{id: w.id, outcome: o}
	if changed && w.typ == Startup && o == Success {
		for _, t := range []Type{Liveness, Readiness} {
			if other, ok := m.workers[key{k.uid, k.container, t}]; ok {
				select {
				case other.trigger <- struct{}{}:
				default:
				}
			}
		}
	}
	m.mu.Unlock()
	if changed {
		m.cfg.OnChange(w.pod.UID)
	}
}

// run dispatches a probe to its handler.
func (m *Manager) run(ctx context.Context, w *worker, spec *v1.Probe, timeout time.Duration) (Outcome, string, error) {
	podIP := *w.podIP.Load()
	h := spec.ProbeHandler
	switch {
	case h.Exec != nil:
		if m.cfg.Exec == nil {
			return Unknown, "", errors.New("no runtime to exec in")
		}
		return Exec(ctx, m.cfg.Exec, w.id, h.Exec.Command, timeout)
	case h.HTTPGet != nil:
		u, err := HTTPURL(h.HTTPGet, w.container, podIP)
		if err != nil {
			return Failure, err.Error(), nil
		}
		return HTTPGet(ctx, u, h.HTTPGet.HTTPHeaders, timeout)
	case h.TCPSocket != nil:
		port, err := Port(h.TCPSocket.Port, w.container)
		if err != nil {
			return Failure, err.Error(), nil
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		return TCP(ctx, host, port, timeout)
	case h.GRPC != nil:
		service := ""
		if h.GRPC.Service != nil {
			service = *h.GRPC.Service
		}
		return GRPC(ctx, podIP, int(h.GRPC.Port), service, timeout)
	}
	return Unknown, "", errors.New("missing probe handler")
}

// observe counts a probe's end for prober_probe_total and prober_probe_duration_seconds (successes and
// unknowns only, as upstream observes them), and keeps it as the probe's last state.
func (m *Manager) observe(w *worker, o Outcome, out string, err error, d time.Duration) {
	res := "successful"
	switch {
	case err != nil || o == Unknown:
		res = "unknown"
	case o == Failure:
		res = "failed"
	}
	if err != nil {
		out = err.Error()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.workers[key{w.pod.UID, w.container.Name, w.typ}]; !ok || cur != w {
		return // stopped meanwhile: its pod's series are gone
	}
	m.counts[Count{Pod: w.pod.Name, Namespace: w.pod.Namespace, PodUID: w.pod.UID, Container: w.container.Name, Type: w.typ, Result: res}]++
	if res != "failed" {
		dk := durationKey{Type: w.typ, Container: w.container.Name, Pod: w.pod.Name, Namespace: w.pod.Namespace}
		h, ok := m.durations[dk]
		if !ok {
			h = &histogram{}
			m.durations[dk] = h
		}
		h.observe(d)
	}
	m.last[key{w.pod.UID, w.container.Name, w.typ}] = State{Container: w.container.Name, Type: w.typ, ContainerID: w.id,
		Result: res, Output: out, At: m.clock.Now()}
}

// late records how long after its tick a probe started.
func (m *Manager) late(d time.Duration) {
	m.mu.Lock()
	m.lateness.observe(d)
	m.mu.Unlock()
}

// States returns the last result of each probe of the pod.
func (m *Manager) States(uid types.UID) []State {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []State
	for k, st := range m.last {
		if k.uid == uid {
			out = append(out, st)
		}
	}
	return out
}

// Counts returns how often each probe ended each way since the kubelet started.
func (m *Manager) Counts() map[Count]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[Count]uint64, len(m.counts))
	for k, v := range m.counts {
		out[k] = v
	}
	return out
}

func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
