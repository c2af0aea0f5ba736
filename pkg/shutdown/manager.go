package shutdown

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// SystemCriticalPriority is the priority from which a pod is critical (system-cluster-critical and
// system-node-critical), as upstream's scheduling package defines it.
const SystemCriticalPriority int32 = 2000000000

// NotReadyReason is upstream's word for a node that is shutting down (the kubelet writes a pod's, see
// pkg/sync's shutdownStatus).
const NotReadyReason = "node is shutting down"

// Group is a set of pods terminated together: those whose priority is at least Priority (and below the next
// group's), each with at most Period to stop.
type Group struct {
	Priority int32
	Period   time.Duration
	Pods     []*v1.Pod
}

// Groups turns the configuration into the groups pods are terminated in, by ascending priority: the
// by-priority list as given, or, from shutdownGracePeriod and shutdownGracePeriodCriticalPods, the regular
// pods with the difference and the critical pods with the rest, as upstream migrates it. No group: the
// feature is off.
func Groups(grace, critical time.Duration, byPriority []kubeletconfig.ShutdownGracePeriodByPodPriority) []Group {
	var out []Group
	if len(byPriority) > 0 {
		for _, p := range byPriority {
			out = append(out, Group{Priority: p.Priority, Period: time.Duration(p.ShutdownGracePeriodSeconds) * time.Second})
		}
	} else if grace > 0 {
		out = []Group{{Priority: 0, Period: grace - critical}, {Priority: SystemCriticalPriority, Period: critical}}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority < out[j].Priority })
	return out
}

// Budget is the whole shutdown's length: what logind must let the lock hold.
func Budget(groups []Group) time.Duration {
	var d time.Duration
	for _, g := range groups {
		d += g.Period
	}
	return d
}

// Assign puts each pod in the group of the highest priority not above its own (the lowest group for a pod
// below every group), and returns the groups with their pods.
func Assign(groups []Group, pods []*v1.Pod) []Group {
	out := make([]Group, len(groups))
	copy(out, groups)
	for i := range out {
		out[i].Pods = nil
	}
	if len(out) == 0 {
		return out
	}
	for _, p := range pods {
		prio := int32(0)
		if p.Spec.Priority != nil {
			prio = *p.Spec.Priority
		}
		k := 0
		for i, g := range out {
			if g.Priority <= prio {
				k = i
			}
		}
		out[k].Pods = append(out[k].Pods, p)
	}
	return out
}

// Config is what a Manager needs. Logind, Pods and Kill are required, and at least one group.
type Config struct {
	Logind Logind
	Groups []Group
	// Pods returns the pods the node runs.
	Pods func() []*v1.Pod
	// Kill terminates a pod for the shutdown (status Failed, reason Terminated) with at most grace to stop,
	// and returns once it has stopped or ctx ends.
	Kill func(ctx context.Context, pod *v1.Pod, grace time.Duration) error
	// Changed is called when the node starts or stops shutting down (its Ready condition changes).
	Changed func()
	Clock   clock.PassiveClock
}

// Manager runs the graceful node shutdown. It is safe for concurrent use.
type Manager struct {
	cfg          Config
	shuttingDown atomic.Bool
	mu           sync.Mutex
	release      func() error
}

// New returns a manager; Start sets logind up.
func New(cfg Config) (*Manager, error) {
	if cfg.Logind == nil || cfg.Pods == nil || cfg.Kill == nil || len(cfg.Groups) == 0 {
		return nil, errors.New("shutdown: logind, the pods, a kill function and the groups are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Changed == nil {
		cfg.Changed = func() {}
	}
	return &Manager{cfg: cfg}, nil
}

// Start raises logind's InhibitDelayMaxSec to the shutdown's budget when it is shorter and takes the delay
// lock. An error means logind cannot give the kubelet its time: the caller runs on without the feature.
func (m *Manager) Start(ctx context.Context) error {
	budget := Budget(m.cfg.Groups)
	cur, err := m.cfg.Logind.InhibitDelayMax()
	if err != nil {
		return err
	}
	if cur < budget {
		if err := m.cfg.Logind.SetInhibitDelayMax(budget); err != nil {
			return err
		}
		// logind rereads its configuration asynchronously.
		for i := 0; i < 50; i++ {
			if cur, err = m.cfg.Logind.InhibitDelayMax(); err == nil && cur >= budget {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if cur < budget {
			return errors.New("logind's InhibitDelayMaxSec stays below the shutdown grace period")
		}
	}
	klog.FromContext(ctx).Info("Graceful node shutdown is on", "gracePeriod", budget, "inhibitDelayMax", cur)
	return m.lock()
}

func (m *Manager) lock() error {
	release, err := m.cfg.Logind.Inhibit()
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.release = release
	m.mu.Unlock()
	return nil
}

func (m *Manager) unlock() {
	m.mu.Lock()
	release := m.release
	m.release = nil
	m.mu.Unlock()
	if release != nil {
		_ = release()
	}
}

// Run follows logind until ctx ends: on a shutdown it terminates the pods and releases the lock; on a
// cancelled one it takes the lock again and the node is ready again.
func (m *Manager) Run(ctx context.Context) error {
	signals, err := m.cfg.Logind.PrepareForShutdown(ctx)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case active, ok := <-signals:
			if !ok {
				return errors.New("the connection to logind ended")
			}
			if !active {
				if m.shuttingDown.Swap(false) {
					logger.Info("Node shutdown cancelled")
					m.cfg.Changed()
					if err := m.lock(); err != nil {
						logger.Error(err, "Failed to take the shutdown inhibitor lock again")
					}
				}
				continue
			}
			if m.shuttingDown.Swap(true) {
				continue
			}
			logger.Info("Node is shutting down: terminating pods", "groups", len(m.cfg.Groups))
			m.cfg.Changed()
			m.terminate(ctx)
			logger.Info("Pods terminated for the node's shutdown; releasing the inhibitor lock")
			m.unlock()
		}
	}
}

// terminate kills the pods group by group, lowest priority first, each group within its period.
func (m *Manager) terminate(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for _, g := range Assign(m.cfg.Groups, m.cfg.Pods()) {
		if len(g.Pods) == 0 {
			continue
		}
		gctx, cancel := context.WithTimeout(ctx, g.Period)
		var wg sync.WaitGroup
		for _, p := range g.Pods {
			grace := g.Period
			if p.Spec.TerminationGracePeriodSeconds != nil {
				grace = min(grace, time.Duration(*p.Spec.TerminationGracePeriodSeconds)*time.Second)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				logger.Info("Terminating pod for the node's shutdown", "pod", klog.KObj(p), "gracePeriod", grace, "priority", g.Priority)
				if err := m.cfg.Kill(gctx, p, grace); err != nil {
					logger.Error(err, "Failed to terminate a pod for the node's shutdown", "pod", klog.KObj(p))
				}
			}()
		}
		wg.Wait()
		cancel()
	}
}

// ShuttingDown reports whether a shutdown is under way.
func (m *Manager) ShuttingDown() bool { return m.shuttingDown.Load() }

// Check is the node's Ready check: an error while the node shuts down.
func (m *Manager) Check() error {
	if m.ShuttingDown() {
		return errors.New(NotReadyReason)
	}
	return nil
}
