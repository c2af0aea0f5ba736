package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

const (
	retryInitial = 200 * time.Millisecond
	retryMax     = 10 * time.Second
	// maxWrites is how many pods' statuses are written at once. Upstream writes one at a time; under a burst
	// of pod starts every write then waits for the one before it (and for its commit to disk), which puts
	// the last pod's Ready hundreds of milliseconds behind. A pod never has more than one write in flight,
	// so its own writes stay in order.
	maxWrites = 4
)

// errNotYet marks a status that cannot be written yet (a static pod whose mirror pod does not exist).
var errNotYet = errors.New("pod not in the API yet")

// Manager keeps the latest status of every pod the kubelet runs and is the only writer of pod status to the
// API. SetPodStatus, ConfirmDeletion, Forget and PodStatus are safe for concurrent use; Run decides what to
// write and writes up to maxWrites pods at once, one write at a time per pod, always the pod's latest status.
// With a nil client it only keeps statuses.
type Manager struct {
	client kubeclient.Interface
	clock  clock.Clock
	signal chan struct{}
	slots  chan struct{} // one per write in flight
	writes sync.WaitGroup

	mu   sync.Mutex
	pods map[types.UID]*entry

	observer Observer
}

// Observer hears of statuses written to the API and seen back from it (the debug page's timeline). Its
// methods must be quick: they run on the writer and the watch.
type Observer interface {
	// StatusPosted: st was written for uid, the write taking from began to end.
	StatusPosted(uid types.UID, st *v1.PodStatus, began, end time.Time)
	// StatusSeen: the API's copy of uid, from a watch, holds st.
	StatusSeen(uid types.UID, st *v1.PodStatus)
}

// SetObserver sets the observer of writes and watch echoes; call it before Run.
func (m *Manager) SetObserver(o Observer) { m.observer = o }

type entry struct {
	namespace, name string
	static          bool
	mirrorHash      string
	status          v1.PodStatus
	version         uint64 // bumped on every change of status
	synced          uint64 // version last written to the API
	deleteRequested bool

	// What the API holds, as last read or written; apiUID is empty when unknown.
	apiUID    types.UID
	apiStatus v1.PodStatus
	apiDelete bool // the API pod has a deletion timestamp

	failures int
	nextTry  time.Time
	lastErr  error
	writing  bool // a write of this pod is in flight
}

// NewManager returns a Manager that writes through client (nil: keep statuses only).
func NewManager(client kubeclient.Interface, clk clock.Clock) *Manager {
	return &Manager{client: client, clock: clk, signal: make(chan struct{}, 1), slots: make(chan struct{}, maxWrites),
		pods: map[types.UID]*entry{}}
}

// SetPodStatus records the latest status of pod. A terminal phase is never replaced by a non-terminal one.
func (m *Manager) SetPodStatus(pod *v1.Pod, st v1.PodStatus) {
	if pod == nil {
		return
	}
	m.mu.Lock()
	e, ok := m.pods[pod.UID]
	if !ok {
		e = &entry{}
		m.pods[pod.UID] = e
	}
	e.namespace, e.name = pod.Namespace, pod.Name
	e.static = podfacts.IsStatic(pod)
	e.mirrorHash = pod.Annotations[podfacts.AnnotationConfigHash]
	if e.apiUID == "" && !e.static && pod.ResourceVersion != "" {
		// A pod read from the API carries what the API held: the first write patches against it instead of
		// reading the pod again. A stale view costs nothing: the patch names the UID, and a watch update
		// (Reconcile) corrects the view.
		e.apiUID, e.apiStatus = pod.UID, *pod.Status.DeepCopy()
		e.apiDelete = pod.DeletionTimestamp != nil
	}
	if ok && isTerminal(e.status.Phase) && !isTerminal(st.Phase) {
		st.Phase, st.Reason, st.Message = e.status.Phase, e.status.Reason, e.status.Message
	}
	changed := !ok || !StatusEqual(e.status, st)
	if changed {
		e.status = *st.DeepCopy()
		e.version++
		e.nextTry = time.Time{}
	}
	m.mu.Unlock()
	if changed {
		m.kick()
	}
}

// PodStatus returns the last status recorded for uid.
func (m *Manager) PodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	if !ok {
		return v1.PodStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// Synced reports whether the latest status of uid has reached the API.
func (m *Manager) Synced(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	return ok && e.synced == e.version
}

// ConfirmDeletion asks that pod, once its final status is written, be removed from the API with grace 0. It
// is called after everything the pod had on the node is gone. Static pods are never deleted this way.
func (m *Manager) ConfirmDeletion(pod *v1.Pod) {
	m.mu.Lock()
	e, ok := m.pods[pod.UID]
	if !ok {
		e = &entry{namespace: pod.Namespace, name: pod.Name, status: *pod.Status.DeepCopy(), version: 1}
		m.pods[pod.UID] = e
	}
	e.static = podfacts.IsStatic(pod)
	e.deleteRequested = true
	if pod.DeletionTimestamp != nil {
		e.apiDelete = true
	}
	e.nextTry = time.Time{}
	m.mu.Unlock()
	m.kick()
}

// Reconcile tells the Manager what the API holds for a pod (from a watch). When it differs from what was
// last written, the status is written again.
func (m *Manager) Reconcile(apiPod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, e := range m.pods {
		if e.namespace != apiPod.Namespace || e.name != apiPod.Name {
			continue
		}
		if !e.static && uid != apiPod.UID {
			continue
		}
		if e.static && apiPod.Annotations[podfacts.AnnotationConfigMirror] != e.mirrorHash {
			continue
		}
		if m.observer != nil {
			m.observer.StatusSeen(uid, &apiPod.Status)
		}
		e.apiUID, e.apiStatus = apiPod.UID, *apiPod.Status.DeepCopy()
		e.apiDelete = apiPod.DeletionTimestamp != nil
		if !StatusEqual(apiPod.Status, MergeStatus(apiPod.Status, e.status)) || (e.deleteRequested && e.apiDelete) {
			e.synced = 0
			e.nextTry = time.Time{}
			m.kickLocked()
		}
	}
}

// Forget drops what the Manager knows of uid.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	delete(m.pods, uid)
	m.mu.Unlock()
}

func (m *Manager) kick() {
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

func (m *Manager) kickLocked() { m.kick() }

// Run writes statuses until ctx is done, then waits for the writes in flight.
func (m *Manager) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	timer := m.clock.NewTimer(retryMax)
	defer timer.Stop()
	defer m.writes.Wait()
	for {
		wait := m.syncAll(ctx, logger)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-m.signal:
		case <-timer.C():
		}
	}
}

// syncAll starts a write for every pod whose status is pending and not being written, as write slots free
// up, and returns how long to wait before the next retry. A finished write wakes Run again.
func (m *Manager) syncAll(ctx context.Context, logger klog.Logger) time.Duration {
	if m.client == nil {
		return retryMax
	}
	now := m.clock.Now()
	m.mu.Lock()
	var due []types.UID
	wait := retryMax
	for uid, e := range m.pods {
		// A pod whose deletion is asked for but whose API object shows no deletion timestamp yet waits for
		// the watch to show one (Reconcile), instead of being written again and again.
		if e.writing || (e.synced == e.version && (!e.deleteRequested || (e.apiUID != "" && !e.apiDelete))) {
			continue
		}
		if d := e.nextTry.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		due = append(due, uid)
	}
	m.mu.Unlock()
	for _, uid := range due {
		select {
		case m.slots <- struct{}{}:
		case <-ctx.Done():
			return wait
		}
		m.mu.Lock()
		e, ok := m.pods[uid]
		if ok {
			e.writing = true
		}
		m.mu.Unlock()
		if !ok {
			<-m.slots
			continue
		}
		m.writes.Add(1)
		go func() {
			defer m.writes.Done()
			err := m.syncPod(ctx, uid)
			m.finishWrite(uid, err, logger)
			<-m.slots
			m.kick()
		}()
	}
	return wait
}

// finishWrite records the outcome of a write of uid: on failure the pod is retried with a doubling delay.
func (m *Manager) finishWrite(uid types.UID, err error, logger klog.Logger) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	if !ok {
		return
	}
	e.writing = false
	e.lastErr = err
	if err == nil {
		e.failures = 0
		return
	}
	e.failures++
	e.nextTry = m.clock.Now().Add(min(retryInitial<<min(e.failures-1, 10), retryMax))
	if !errors.Is(err, errNotYet) {
		logger.Info("Failed to update pod status", "pod", klog.KRef(e.namespace, e.name), "err", err)
	}
}

// syncPod writes one pod's status (and confirms its deletion when asked).
func (m *Manager) syncPod(ctx context.Context, uid types.UID) error {
	m.mu.Lock()
	e, ok := m.pods[uid]
	if !ok {
		m.mu.Unlock()
		return nil
	}
	snap := *e
	snap.status = *e.status.DeepCopy()
	m.mu.Unlock()

	pods := m.client.CoreV1().Pods(snap.namespace)
	if snap.apiUID == "" {
		apiPod, err := pods.Get(ctx, snap.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if snap.static {
				return errNotYet
			}
			m.Forget(uid) // the pod is gone from the API: nothing to write
			return nil
		}
		if err != nil {
			return fmt.Errorf("get pod: %w", err)
		}
		if snap.static && apiPod.Annotations[podfacts.AnnotationConfigMirror] != snap.mirrorHash {
			return errNotYet // the mirror pod is missing or outdated: it will be recreated
		}
		if !snap.static && apiPod.UID != uid {
			m.Forget(uid) // replaced by another pod of the same name
			return nil
		}
		snap.apiUID, snap.apiStatus, snap.apiDelete = apiPod.UID, apiPod.Status, apiPod.DeletionTimestamp != nil
	}

	merged := MergeStatus(snap.apiStatus, snap.status)
	if !StatusEqual(snap.apiStatus, merged) {
		patch, err := PatchBytes(snap.apiUID, snap.apiStatus, merged)
		if err != nil {
			return err
		}
		// An empty patch (the two differ only where the API does not store them) is not sent.
		if !emptyPatch(patch) {
			began := m.clock.Now()
			updated, err := pods.Patch(ctx, snap.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			if err != nil {
				m.forgetAPI(uid)
				if apierrors.IsNotFound(err) && !snap.static {
					m.Forget(uid)
					return nil
				}
				return fmt.Errorf("patch pod status: %w", err)
			}
			end := m.clock.Now()
			klog.FromContext(ctx).V(3).Info("Patched pod status", "pod", klog.KRef(snap.namespace, snap.name),
				"phase", merged.Phase, "ready", isReady(merged), "took", end.Sub(began))
			if m.observer != nil {
				m.observer.StatusPosted(uid, &merged, began, end)
			}
			snap.apiStatus, snap.apiDelete = updated.Status, updated.DeletionTimestamp != nil
		}
	}

	m.mu.Lock()
	if cur, ok := m.pods[uid]; ok {
		// A deletion timestamp is never taken back: one seen meanwhile (ConfirmDeletion, Reconcile) stays
		// seen, whatever this write's older view of the pod said.
		apiDelete := snap.apiDelete || (cur.apiDelete && cur.apiUID == snap.apiUID)
		cur.apiUID, cur.apiStatus, cur.apiDelete = snap.apiUID, snap.apiStatus, apiDelete
		snap.apiDelete = apiDelete
		if cur.version == snap.version {
			cur.synced = snap.version
		}
	}
	m.mu.Unlock()

	if !snap.deleteRequested || snap.static || !snap.apiDelete || snap.version != m.version(uid) {
		return nil
	}
	zero := int64(0)
	began := m.clock.Now()
	err := pods.Delete(ctx, snap.name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &snap.apiUID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod: %w", err)
	}
	klog.FromContext(ctx).V(3).Info("Deleted pod", "pod", klog.KRef(snap.namespace, snap.name), "took", m.clock.Since(began))
	m.Forget(uid)
	return nil
}

func (m *Manager) version(uid types.UID) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.pods[uid]; ok {
		return e.version
	}
	return 0
}

func (m *Manager) forgetAPI(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.pods[uid]; ok {
		e.apiUID = ""
	}
}
