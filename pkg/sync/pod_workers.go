package podsync

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/metrics"
	"github.com/nodeagent/kubelet/pkg/pleg"
)

// workerState is where a pod is in its life on this node.
type workerState int

const (
	// stateSyncing: the pod should run; each sync makes the runtime match its spec.
	stateSyncing workerState = iota
	// stateTerminating: the pod is being stopped; nothing is started any more.
	stateTerminating
	// stateTerminated: nothing of the pod runs; what it left is cleaned up once it is deleted.
	stateTerminated
	// stateFinished: everything is gone; the worker has exited.
	stateFinished
)

func (s workerState) String() string {
	return [...]string{"Syncing", "Terminating", "Terminated", "Finished"}[s]
}

// syncOutcome is what a sync tells its worker.
type syncOutcome struct {
	terminal bool          // the pod is done: terminate it
	changed  bool          // the runtime was changed: relist the pod now
	requeue  time.Duration // sync again after this long (0: the default resync)
}

// podSyncer does the work of each state. Its methods are called from the pod's worker goroutine only.
type podSyncer interface {
	syncPod(ctx context.Context, pod *v1.Pod, state *pleg.PodState) (syncOutcome, error)
	syncTerminatingPod(ctx context.Context, pod *v1.Pod, state *pleg.PodState, grace *int64) error
	syncTerminatedPod(ctx context.Context, pod *v1.Pod, state *pleg.PodState, deleted bool) error
}

// podStateSource is the part of the PLEG workers use.
type podStateSource interface {
	Cache() *pleg.Cache
	RelistPod(ctx context.Context, uid types.UID) error
}

type updateType int

const (
	updateSync updateType = iota
	updateKill
)

// podUpdate asks a pod's worker to act.
type podUpdate struct {
	typ updateType
	pod *v1.Pod
	// runningPod is what runs of a pod the kubelet has no spec for (an orphan).
	runningPod *pleg.PodState
	// grace overrides the pod's termination grace period (only ever shortened).
	grace *int64
	// deleted: the pod is deleted or gone from its sources; remove everything it left.
	deleted bool
}

type podWork struct {
	pod            *v1.Pod
	state          workerState
	pending        bool
	notify         chan struct{}
	cancelSync     context.CancelFunc
	grace          *int64
	deleted        bool
	terminatedDone bool
	lastSync       time.Time // the next sync waits for runtime state at least this fresh
	terminatingAt  time.Time
	lastStart      time.Time
	lastDuration   time.Duration
	lastErr        error
	syncs          int
}

// podWorkers runs one goroutine per pod. Updates for a pod coalesce in one pending slot; the worker always
// syncs the latest spec. A kill moves the pod to Terminating for good and cancels a sync in flight.
type podWorkers struct {
	syncer podSyncer
	states podStateSource
	clock  clock.Clock
	resync time.Duration // how long a synced pod waits for its next periodic sync
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	pods map[types.UID]*podWork
	due  map[types.UID]time.Time
}

func newPodWorkers(syncer podSyncer, states podStateSource, clk clock.Clock, resync time.Duration) *podWorkers {
	ctx, cancel := context.WithCancel(context.Background())
	return &podWorkers{
		syncer: syncer, states: states, clock: clk, resync: resync, ctx: ctx, cancel: cancel,
		pods: map[types.UID]*podWork{}, due: map[types.UID]time.Time{},
	}
}

// setContext makes workers log through ctx's logger; call before the first update.
func (w *podWorkers) setContext(ctx context.Context) {
	w.ctx, w.cancel = context.WithCancel(klog.NewContext(context.Background(), klog.FromContext(ctx)))
}

// UpdatePod hands an update to the pod's worker, starting the worker on the first update.
func (w *podWorkers) UpdatePod(u podUpdate) {
	var uid types.UID
	switch {
	case u.pod != nil:
		uid = u.pod.UID
	case u.runningPod != nil:
		uid = u.runningPod.UID
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	pw, ok := w.pods[uid]
	if !ok {
		pw = &podWork{notify: make(chan struct{}, 1)}
		w.pods[uid] = pw
		w.wg.Add(1)
		go w.run(uid, pw)
	}
	if pw.state == stateFinished {
		return
	}
	if u.pod != nil {
		pw.pod = u.pod
	}
	if pw.pod == nil && u.runningPod != nil {
		pw.pod = podFromRunning(u.runningPod)
	}
	if u.typ == updateKill {
		if pw.state == stateSyncing {
			pw.state = stateTerminating
			pw.terminatingAt = w.clock.Now()
			if pw.cancelSync != nil {
				pw.cancelSync()
			}
		}
		if u.grace != nil && (pw.grace == nil || *u.grace < *pw.grace) {
			g := *u.grace
			pw.grace = &g
		}
		pw.deleted = pw.deleted || u.deleted
	}
	pw.pending = true
	select {
	case pw.notify <- struct{}{}:
	default:
	}
}

// podFromRunning makes a minimal pod for an orphan, from what the runtime knows of it.
func podFromRunning(s *pleg.PodState) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID}}
}

func (w *podWorkers) run(uid types.UID, pw *podWork) {
	defer w.wg.Done()
	for {
		select {
		case <-pw.notify:
		case <-w.ctx.Done():
			return
		}
		for {
			again, finished := w.processOne(uid, pw)
			if finished {
				return
			}
			if !again {
				break
			}
		}
	}
}

// processOne runs the pending update, if any. It reports whether to look for another, and whether the
// worker is finished.
func (w *podWorkers) processOne(uid types.UID, pw *podWork) (bool, bool) {
	w.mu.Lock()
	if !pw.pending || w.ctx.Err() != nil {
		w.mu.Unlock()
		return false, false
	}
	pw.pending = false
	pod, st, grace, deleted, since, first := pw.pod, pw.state, pw.grace, pw.deleted, pw.lastSync, pw.syncs == 0
	if st == stateTerminated && pw.terminatedDone && !deleted {
		w.mu.Unlock()
		return true, false
	}
	syncCtx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	if st == stateSyncing {
		pw.cancelSync = cancel
	}
	w.mu.Unlock()

	logger := klog.FromContext(w.ctx).WithValues("pod", klog.KObj(pod), "podUID", uid)
	start := w.clock.Now()
	var out syncOutcome
	state, err := w.states.Cache().GetNewerThan(syncCtx, uid, since)
	if err == nil {
		switch st {
		case stateSyncing:
			out, err = w.syncer.syncPod(syncCtx, pod, state)
		case stateTerminating:
			err = w.syncer.syncTerminatingPod(syncCtx, pod, state, grace)
			out.changed = true
		case stateTerminated:
			err = w.syncer.syncTerminatedPod(syncCtx, pod, state, deleted)
			out.changed = true
		}
	}
	end := w.clock.Now()
	observeSync(st, first, end.Sub(start))
	if (out.changed || err != nil) && w.ctx.Err() == nil {
		if rerr := w.states.RelistPod(w.ctx, uid); rerr != nil {
			logger.V(2).Info("Pod relist after sync failed", "err", rerr)
		}
	}
	if err != nil && syncCtx.Err() == nil {
		logger.Info("Pod sync failed", "state", st.String(), "err", err)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	pw.cancelSync = nil
	pw.lastSync, pw.lastStart, pw.lastDuration, pw.lastErr = end, start, end.Sub(start), err
	pw.syncs++
	finished := false
	switch st {
	case stateSyncing:
		if err == nil && out.terminal && pw.state == stateSyncing {
			pw.state = stateTerminating
			pw.terminatingAt = end
			pw.pending = true
		}
	case stateTerminating:
		if err == nil {
			pw.state = stateTerminated
			pw.pending = true
		}
	case stateTerminated:
		if err == nil {
			pw.terminatedDone = true
			if deleted {
				pw.state = stateFinished
				finished = true
			}
		}
	}
	if finished {
		delete(w.due, uid)
		return false, true
	}
	delay := w.resync
	if err != nil {
		delay = errorRetryPeriod
	}
	if out.requeue > 0 && out.requeue < delay {
		delay = out.requeue
	}
	w.due[uid] = end.Add(delay)
	return true, false
}

// observeSync records a sync's duration in kubelet_pod_worker_duration_seconds by upstream's operation types:
// a pod's first sync creates it, a terminating or terminated pod's is a kill, any other a sync.
func observeSync(st workerState, first bool, d time.Duration) {
	op := "sync"
	switch {
	case st != stateSyncing:
		op = "kill"
	case first:
		op = "create"
	}
	metrics.PodWorkerDuration.WithLabelValues(op).Observe(d.Seconds())
}

// takeDue returns the pods whose next sync is due at now and clears their due time.
func (w *podWorkers) takeDue(now time.Time) []types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []types.UID
	for uid, at := range w.due {
		if !at.After(now) {
			out = append(out, uid)
			delete(w.due, uid)
		}
	}
	return out
}

// workerInfo is a read-only view of one worker.
type workerInfo struct {
	pod           *v1.Pod
	state         workerState
	terminatingAt time.Time
	grace         *int64
	deleted       bool
	lastStart     time.Time
	lastDuration  time.Duration
	lastErr       error
	syncs         int
}

// known returns a view of every worker.
func (w *podWorkers) known() map[types.UID]workerInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[types.UID]workerInfo, len(w.pods))
	for uid, pw := range w.pods {
		out[uid] = workerInfo{pod: pw.pod, state: pw.state, deleted: pw.deleted, lastStart: pw.lastStart,
			lastDuration: pw.lastDuration, lastErr: pw.lastErr, syncs: pw.syncs, terminatingAt: pw.terminatingAt, grace: pw.grace}
	}
	return out
}

// state returns the state of uid's worker; ok is false when there is none.
func (w *podWorkers) state(uid types.UID) (workerState, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pw, ok := w.pods[uid]
	if !ok {
		return 0, false
	}
	return pw.state, true
}

// cleanedUp reports whether nothing of the pod runs and what it held is released: terminated with the
// terminated pod's sync done (volumes unmounted, cgroup removed), finished, or unknown.
func (w *podWorkers) cleanedUp(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	pw, ok := w.pods[uid]
	return !ok || pw.state == stateFinished || (pw.state == stateTerminated && pw.terminatedDone)
}

// forget drops a finished worker.
func (w *podWorkers) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pw, ok := w.pods[uid]; ok && pw.state == stateFinished {
		delete(w.pods, uid)
		delete(w.due, uid)
	}
}

// stopAll stops every worker and waits for them.
func (w *podWorkers) stopAll() {
	w.cancel()
	w.wg.Wait()
}
