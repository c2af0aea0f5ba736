package eviction

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/metrics"
	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/status"
)

// immediateGrace is the grace period, in seconds, of a pod evicted for a hard threshold (upstream's).
const immediateGrace = 1

// cleanupTimeout bounds how long the manager waits for an evicted pod to stop before it observes again.
const cleanupTimeout = 30 * time.Second

// Evicter terminates a pod for eviction within grace seconds: its status becomes phase Failed, reason
// Evicted, with the message and the DisruptionTarget condition. It need not wait for the pod to stop.
type Evicter interface {
	EvictPod(ctx context.Context, pod *v1.Pod, grace int64, message string) error
}

// Reclaimer frees what the node itself holds of a resource (dead containers, unused images) before pods are
// evicted for it.
type Reclaimer interface {
	Reclaim(ctx context.Context, r v1.ResourceName) error
}

// Config is what the manager needs.
type Config struct {
	Thresholds []Threshold
	// MaxPodGracePeriod caps, in seconds, the grace period of a pod evicted for a soft threshold
	// (--eviction-max-pod-grace-period, 0 by default as upstream's; negative: the pod's own).
	MaxPodGracePeriod int64
	// TransitionPeriod is how long a pressure condition stays after its signal recovered (5m).
	TransitionPeriod time.Duration
	// Interval is how often the signals are observed (10 s).
	Interval time.Duration
	// MemoryAvailable, when set, reads the node's available memory and its capacity cheaply; the memory
	// watch reads it every 200 ms and observes at once when a memory.available threshold is crossed (the
	// role of upstream's memory cgroup threshold notification, on cgroup v1 and v2 alike).
	MemoryAvailable func() (available, capacity int64, err error)
	// Summary returns the last stats gathering, and Gather gathers anew (when the last is older than
	// Interval, and after a reclaim).
	Summary func() *statsapi.Summary
	Gather  func(ctx context.Context)
	// ActivePods are the pods that run or may run: the candidates for eviction.
	ActivePods func() []*v1.Pod
	// Ready reports whether the pod sources have synced: until then nothing is evicted (a restarted
	// kubelet has not seen every pod yet); optional.
	Ready func() bool
	// Stopped reports whether an evicted pod is cleaned up (its containers stopped, its volumes unmounted,
	// its cgroup removed, as upstream's podResourcesAreReclaimed); the next observation waits for it (at most
	// 30 s). Without it, the pod leaving ActivePods is taken for stopped.
	Stopped   func(*v1.Pod) bool
	Evicter   Evicter
	Reclaimer Reclaimer // optional
	Recorder  record.EventRecorder
	NodeRef   *v1.ObjectReference
	Clock     clock.WithTicker
}

// Manager observes the eviction signals and acts on them. Build it with New, start it with Run.
type Manager struct {
	cfg Config

	mu         sync.Mutex
	conditions []v1.NodeConditionType             // the pressure conditions reported now
	lastRaised map[v1.NodeConditionType]time.Time // when each condition was last raised
	firstMet   map[Threshold]time.Time            // when each threshold met now was first met
	acting     []Threshold                        // the thresholds acted on at the last observation
	evictedAt  time.Time                          // the last eviction: later observations must be newer
	unobserved map[Signal]bool                    // signals with thresholds the last gathering lacked (logged)
}

// New returns a manager for cfg, with upstream's defaults where cfg leaves them zero.
func New(cfg Config) *Manager {
	if cfg.TransitionPeriod <= 0 {
		cfg.TransitionPeriod = DefaultTransitionPeriod
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultMonitorInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	return &Manager{cfg: cfg, lastRaised: map[v1.NodeConditionType]time.Time{}, firstMet: map[Threshold]time.Time{},
		unobserved: map[Signal]bool{}}
}

// Run observes every Interval, and at once when the memory watch sees a memory threshold crossed, until ctx
// ends. After an eviction it waits (at most 30 s) for the pod to stop before it observes again, as upstream
// waits for the pod's cleanup.
func (m *Manager) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	logger.Info("Eviction manager started", "thresholds", m.describe(), "interval", m.cfg.Interval)
	t := m.cfg.Clock.NewTicker(m.cfg.Interval)
	defer t.Stop()
	w := m.newWatch()
	defer w.stop()
	fresh := false
	for {
		if evicted := m.synchronize(ctx, fresh); evicted != nil {
			m.waitGone(ctx, evicted)
		}
		fresh = false
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				break wait
			case <-w.ticks():
				if w.crossedNow(ctx) {
					logger.V(2).Info("Eviction manager: memory threshold crossed, observing now")
					fresh = true
					break wait
				}
			}
		}
	}
}

func (m *Manager) describe() string {
	var parts []string
	for _, t := range m.cfg.Thresholds {
		s := t.String()
		if !t.Hard() {
			s += fmt.Sprintf(" (soft, %v)", t.GracePeriod)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// summary returns a gathering at most Interval old.
func (m *Manager) summary(ctx context.Context, fresh bool) *statsapi.Summary {
	s := m.cfg.Summary()
	m.mu.Lock()
	evictedAt := m.evictedAt
	m.mu.Unlock()
	// The stats collector gathers every Interval on its own; only a gathering it missed is made here, so
	// that the two timers do not double the gatherings.
	stale := s == nil || s.Node.Memory == nil || m.cfg.Clock.Since(s.Node.Memory.Time.Time) > m.cfg.Interval*3/2 ||
		!s.Node.Memory.Time.After(evictedAt) // what the evicted pod used is gone from a later gathering only
	if (fresh || stale) && m.cfg.Gather != nil {
		m.cfg.Gather(ctx)
		s = m.cfg.Summary()
	}
	return s
}

// Synchronize observes the signals once, updates the conditions and, when a threshold is met past its
// grace period, reclaims node-level resources or evicts one pod. It returns the evicted pod, if any.
func (m *Manager) Synchronize(ctx context.Context) *v1.Pod { return m.synchronize(ctx, false) }

// synchronize is Synchronize on a new gathering when fresh.
func (m *Manager) synchronize(ctx context.Context, fresh bool) *v1.Pod {
	logger := klog.FromContext(ctx)
	sum := m.summary(ctx, fresh)
	obs := observe(sum)
	now := m.cfg.Clock.Now()
	m.noteUnobserved(ctx, obs)

	m.mu.Lock()
	metNow := merge(met(m.cfg.Thresholds, obs, false), met(m.acting, obs, true))
	m.firstMet = firstSeen(metNow, m.firstMet, now)
	was := m.conditions
	m.conditions = conditionsHeld(conditions(metNow), m.lastRaised, m.cfg.TransitionPeriod, now)
	acting := pastGrace(metNow, m.firstMet, now)
	m.acting = acting
	conds := m.conditions
	m.mu.Unlock()

	if !slices.Equal(was, conds) {
		logger.Info("Eviction manager: node pressure changed", "conditions", conds)
	}
	for _, t := range metNow {
		if !slices.ContainsFunc(acting, t.same) {
			logger.V(2).Info("Eviction manager: threshold met, grace period not yet over", "threshold", t.String(), "gracePeriod", t.GracePeriod)
		}
	}
	ready := m.cfg.Ready == nil || m.cfg.Ready()
	if ready {
		if evicted := m.evictOverLimits(ctx, statsByPod(sum)); evicted != nil {
			return evicted
		}
	}
	t, ok := toReclaim(acting)
	if !ok {
		return nil
	}
	if !ready {
		logger.Info("Eviction manager: threshold met, but the pod sources have not synced yet", "threshold", t.String())
		return nil
	}
	r := signalFacts[t.Signal].resource
	o := obs[t.Signal]
	logger.Info("Eviction manager: attempting to reclaim", "resourceName", r, "threshold", t.String(), "available", quantity(o.available, r))
	m.cfg.Recorder.Eventf(m.cfg.NodeRef, v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", r)

	if m.cfg.Reclaimer != nil && r != v1.ResourceMemory && r != resourcePIDs {
		if err := m.cfg.Reclaimer.Reclaim(ctx, r); err != nil {
			logger.Info("Eviction manager: node-level reclaim failed", "resourceName", r, "err", err.Error())
		}
		sum = m.summary(ctx, true)
		obs = observe(sum)
		if len(met([]Threshold{t}, obs, true)) == 0 {
			logger.Info("Eviction manager: able to reduce resource pressure without evicting pods", "resourceName", r)
			return nil
		}
	}
	return m.evictOne(ctx, t, r, obs, statsByPod(sum))
}

// evictOne evicts the first pod of the ranking that may be evicted.
func (m *Manager) evictOne(ctx context.Context, t Threshold, r v1.ResourceName, obs observations, ps podStats) *v1.Pod {
	logger := klog.FromContext(ctx)
	pods := m.cfg.ActivePods()
	if len(pods) == 0 {
		logger.Info("Eviction manager: thresholds met, but no pods are active to evict", "threshold", t.String())
		return nil
	}
	rank(pods, ps, r)
	logger.Info("Eviction manager: pods ranked for eviction", "pods", klog.KObjSlice(pods))
	for _, pod := range pods {
		grace := int64(immediateGrace)
		if !t.Hard() {
			grace = softGrace(pod, m.cfg.MaxPodGracePeriod)
		}
		if m.evict(ctx, pod, grace, message(pod, r, t, obs, ps), string(t.Signal)) {
			return pod
		}
	}
	logger.Info("Eviction manager: unable to evict any pod from the node (all are critical)")
	return nil
}

// noteUnobserved logs, once until it is observed again, each signal with a threshold that the gathering
// could not read (a failed statfs or cgroup read): its thresholds are skipped, never met on a guess.
func (m *Manager) noteUnobserved(ctx context.Context, obs observations) {
	for _, t := range m.cfg.Thresholds {
		_, ok := obs[t.Signal]
		switch {
		case !ok && !m.unobserved[t.Signal]:
			klog.FromContext(ctx).Info("Eviction manager: no observation of the signal; its thresholds are skipped until it is read again", "signal", t.Signal)
			m.unobserved[t.Signal] = true
		case ok && m.unobserved[t.Signal]:
			klog.FromContext(ctx).Info("Eviction manager: the signal is observed again", "signal", t.Signal)
			delete(m.unobserved, t.Signal)
		}
	}
}

// evictOverLimits evicts the pods that exceed a local storage limit (an emptyDir's sizeLimit, their
// limits.ephemeral-storage), each alone and at once, as upstream does before it looks at the thresholds. It
// returns the first evicted.
func (m *Manager) evictOverLimits(ctx context.Context, ps podStats) *v1.Pod {
	var first *v1.Pod
	for _, v := range localStorageViolations(m.cfg.ActivePods(), ps) {
		if m.evict(ctx, v.pod, immediateGrace, v.message, "ephemeral-storage") && first == nil {
			first = v.pod
		}
	}
	return first
}

// softGrace is the grace period of a pod evicted for a soft threshold, as upstream's: the pod's own, capped
// by maxGrace unless maxGrace is negative.
func softGrace(pod *v1.Pod, maxGrace int64) int64 {
	own := int64(30) // the API server's default
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		own = *g
	}
	if maxGrace < 0 {
		return own
	}
	return min(own, maxGrace)
}

// evict has the pod evicted with its Evicted event and the log line, and counts it under signal. A critical
// pod (static, mirror, system-critical priority) is never evicted, as upstream: evict says false.
func (m *Manager) evict(ctx context.Context, pod *v1.Pod, grace int64, msg, signal string) bool {
	logger := klog.FromContext(ctx)
	if podfacts.IsCritical(pod) {
		logger.Info("Eviction manager: a critical pod is not evicted", "pod", klog.KObj(pod), "message", msg)
		return false
	}
	m.cfg.Recorder.Event(podObject(pod), v1.EventTypeWarning, status.ReasonEvicted, msg)
	logger.Info("Eviction manager: evicting pod", "pod", klog.KObj(pod), "podUID", pod.UID, "gracePeriod", grace, "message", msg)
	if err := m.cfg.Evicter.EvictPod(ctx, pod, grace, msg); err != nil {
		logger.Error(err, "Eviction manager: pod failed to evict", "pod", klog.KObj(pod))
	}
	metrics.Evictions.WithLabelValues(signal).Inc()
	m.mu.Lock()
	m.evictedAt = m.cfg.Clock.Now()
	m.mu.Unlock()
	return true
}

// podObject is what an event about a pod refers to.
func podObject(pod *v1.Pod) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

// waitGone waits until the evicted pod is cleaned up, or 30 s, or ctx ends.
func (m *Manager) waitGone(ctx context.Context, pod *v1.Pod) {
	deadline := m.cfg.Clock.Now().Add(cleanupTimeout)
	t := m.cfg.Clock.NewTicker(time.Second)
	defer t.Stop()
	stopped := m.cfg.Stopped
	if stopped == nil {
		stopped = func(pod *v1.Pod) bool {
			return !slices.ContainsFunc(m.cfg.ActivePods(), func(p *v1.Pod) bool { return p.UID == pod.UID })
		}
	}
	// What the pod held (its memory-backed volumes, its page cache) is gone from a gathering made once it
	// is cleaned up, not from one the stats collector made meanwhile: the next observation needs a later one.
	defer func() {
		m.mu.Lock()
		m.evictedAt = m.cfg.Clock.Now()
		m.mu.Unlock()
	}()
	for m.cfg.Clock.Now().Before(deadline) {
		if stopped(pod) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
	klog.FromContext(ctx).Info("Eviction manager: timed out waiting for the evicted pod to stop", "pod", klog.KObj(pod))
}

// Pressure reports the pressure conditions now: memory, disk and PID.
func (m *Manager) Pressure() (memory, disk, pid bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Contains(m.conditions, v1.NodeMemoryPressure), slices.Contains(m.conditions, v1.NodeDiskPressure),
		slices.Contains(m.conditions, v1.NodePIDPressure)
}

// Admit decides whether a pod may start under the pressure now, as upstream's eviction admission: critical
// pods always; under memory pressure alone, pods that are not BestEffort, and BestEffort pods that tolerate
// the memory-pressure taint; under any other pressure, none. A refusal has reason Evicted.
func (m *Manager) Admit(pod *v1.Pod) (bool, string, string) {
	m.mu.Lock()
	conds := slices.Clone(m.conditions)
	m.mu.Unlock()
	return admit(pod, conds)
}

func admit(pod *v1.Pod, conds []v1.NodeConditionType) (bool, string, string) {
	if len(conds) == 0 || podfacts.IsCritical(pod) {
		return true, "", ""
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if podfacts.QOSClass(pod) != v1.PodQOSBestEffort {
			return true, "", ""
		}
		taint := []v1.Taint{{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}}
		if _, bad := podfacts.UntoleratedTaint(taint, pod.Spec.Tolerations, podfacts.NoScheduleOrNoExecute); !bad {
			return true, "", ""
		}
	}
	names := make([]string, len(conds))
	for i, c := range conds {
		names[i] = string(c)
	}
	return false, status.ReasonEvicted, fmt.Sprintf("The node had condition: [%s]. ", strings.Join(names, " "))
}

// EvictFunc is an Evicter made of a function.
type EvictFunc func(ctx context.Context, pod *v1.Pod, grace int64, message string) error

// EvictPod calls f.
func (f EvictFunc) EvictPod(ctx context.Context, pod *v1.Pod, grace int64, message string) error {
	return f(ctx, pod, grace, message)
}
