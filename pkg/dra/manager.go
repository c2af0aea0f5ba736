package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/pkg/dra/state"
	"github.com/nodeagent/kubelet/pkg/kubeclient"
)

const (
	// StateFile is the checkpoint's name in the root directory, upstream's.
	StateFile = "dra_manager_state"
	// defaultCallTimeout bounds each call of a driver, upstream's: half the pod sync's retry period.
	defaultCallTimeout = 45 * time.Second
	// defaultWipingDelay is how long a driver whose last endpoint went away has to come back before its
	// ResourceSlices are deleted, upstream's: long enough for a restart of its pod.
	defaultWipingDelay = 30 * time.Second
)

// Config is what New needs.
type Config struct {
	// NodeName is this node's name; its ResourceSlices are the ones wiped.
	NodeName string
	// RootDir is the kubelet's root directory; the checkpoint is RootDir/dra_manager_state.
	RootDir string
	// Client reads ResourceClaims and deletes ResourceSlices; nil: no API server (pods with claims fail to
	// prepare, nothing is wiped).
	Client kubeclient.Interface
	// Registerer, when set, gets the manager's metrics.
	Registerer prometheus.Registerer
	// CallTimeout bounds each call of a driver; 0: the dra-call-timeout failpoint, else 45 s.
	CallTimeout time.Duration
}

// Manager prepares the ResourceClaims of pods with their DRA drivers before the pods start, gives their
// containers the CDI devices the drivers reported, and unprepares the claims when the last pod using them on
// the node is gone. It is also the plugin watcher's handler of DRA drivers. Create it with New.
type Manager struct {
	nodeName    string
	client      kubeclient.Interface
	callTimeout time.Duration
	wipingDelay time.Duration
	metrics     *metrics
	cache       *claimCache

	// bg is the context of the delayed wiping, ended when Run returns.
	bg   context.Context
	stop context.CancelFunc

	pluginsMu sync.Mutex
	plugins   map[string][]*plugin   // by driver name, oldest first
	wipes     map[string]*time.Timer // pending wipes by driver name

	waitMu  sync.Mutex
	waiting map[types.UID]failure // the last prepare failure of each pod
	// prepareStarted is when the last Prepare of each pod started: Reconcile leaves pods alone that began to
	// prepare after its list of active pods was made.
	prepareStarted map[types.UID]time.Time

	reconciling atomic.Bool
	reconcileWG sync.WaitGroup

	// health is the devices' health from the drivers' health streams, which healthWG counts.
	health        *healthCache
	healthChanged atomic.Pointer[func(types.UID)]
	healthBackoff wait.Backoff
	healthWG      sync.WaitGroup
}

// failure is a pod's last prepare failure.
type failure struct {
	claim, driver, err string
}

// New returns a manager with the claims of the checkpoint in cfg.RootDir. A corrupt checkpoint does not stop
// the kubelet (upstream's does): it is logged, renamed to dra_manager_state.corrupt, and the manager starts
// empty; claims of running pods are prepared again on their next sync.
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" {
		return nil, errors.New("DRA manager: no root directory")
	}
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return nil, fmt.Errorf("DRA manager: %w", err)
	}
	path := filepath.Join(cfg.RootDir, StateFile)
	logger := klog.Background().WithName("dra")
	list, err := state.Load(path)
	var corrupt *state.CorruptCheckpointError
	write := false
	switch {
	case errors.As(err, &corrupt):
		logger.Error(err, "The DRA checkpoint is corrupt: starting without its claims, keeping it as "+StateFile+".corrupt",
			"path", path, "checksumInFile", corrupt.ActualCS, "checksumOfData", corrupt.ExpectedCS)
		if rerr := os.Rename(path, path+".corrupt"); rerr != nil {
			logger.Error(rerr, "Keeping the corrupt DRA checkpoint", "path", path)
		}
		list, write = nil, true
	case err != nil:
		return nil, fmt.Errorf("read the DRA checkpoint: %w", err)
	default:
		if _, serr := os.Stat(path); serr != nil {
			write = true // upstream writes an empty checkpoint at start
		}
	}
	cache := &claimCache{claims: map[string]*claimInfo{}, path: path}
	for _, e := range list {
		cache.add(&claimInfo{ClaimInfoState: e})
	}
	if write {
		if err := state.Store(path, nil); err != nil {
			return nil, fmt.Errorf("write the DRA checkpoint: %w", err)
		}
	}
	timeout := cfg.CallTimeout
	if timeout <= 0 {
		timeout = failpoint.Duration(failpoint.DRACallTimeout)
	}
	if timeout <= 0 {
		timeout = defaultCallTimeout
	}
	m := &Manager{nodeName: cfg.NodeName, client: cfg.Client, callTimeout: timeout, wipingDelay: defaultWipingDelay,
		metrics: newMetrics(), cache: cache, plugins: map[string][]*plugin{}, wipes: map[string]*time.Timer{},
		waiting: map[types.UID]failure{}, prepareStarted: map[types.UID]time.Time{},
		health: &healthCache{devices: map[deviceKey]deviceHealth{}, drivers: sets.New[string]()}, healthBackoff: defaultHealthBackoff}
	m.bg, m.stop = context.WithCancel(klog.NewContext(context.Background(), logger))
	if cfg.Registerer != nil {
		if err := m.metrics.register(cfg.Registerer, cache); err != nil {
			return nil, fmt.Errorf("DRA manager metrics: %w", err)
		}
	}
	return m, nil
}

// Run wipes this node's ResourceSlices (no driver has registered yet after a start; drivers publish theirs
// again), then waits for ctx to end, stops the pending wipes of drivers that went away and the health
// streams, and waits for those to end.
func (m *Manager) Run(ctx context.Context) {
	defer func() {
		m.stop()
		defer m.healthWG.Wait()
		m.pluginsMu.Lock()
		for name, t := range m.wipes {
			t.Stop()
			delete(m.wipes, name)
		}
		m.pluginsMu.Unlock()
	}()
	m.wipeSlices(ctx, "")
	<-ctx.Done()
}

// Holds says whether the pod with that UID still uses prepared (or preparing) claims: its terminal phase
// waits until they are unprepared, as upstream's PodMightNeedToUnprepareResources.
func (m *Manager) Holds(pod types.UID) bool {
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	return m.cache.hasPod(pod)
}

// Reconcile unprepares, in a goroutine of its own, the claims of the pods the cache knows that are not in
// active (deleted while the kubelet was down, or force-deleted). One runs at a time: a call while one runs
// does nothing, the next call catches up. Call it only once the pod sources have synced; ctx bounds the
// work.
func (m *Manager) Reconcile(ctx context.Context, active []types.UID) {
	called := time.Now()
	keep := sets.New[string]()
	for _, uid := range active {
		keep.Insert(string(uid))
	}
	m.waitMu.Lock()
	for uid, started := range m.prepareStarted {
		if started.After(called) {
			keep.Insert(string(uid)) // began to prepare after active was listed
		} else if !keep.Has(string(uid)) {
			delete(m.prepareStarted, uid)
			delete(m.waiting, uid)
		}
	}
	for uid := range m.waiting {
		if !keep.Has(string(uid)) {
			delete(m.waiting, uid)
		}
	}
	m.waitMu.Unlock()
	if !m.reconciling.CompareAndSwap(false, true) {
		return
	}
	m.reconcileWG.Add(1)
	go func() {
		defer m.reconcileWG.Done()
		defer m.reconciling.Store(false)
		m.cache.mu.RLock()
		gone := m.cache.podsNotIn(keep)
		m.cache.mu.RUnlock()
		logger := klog.FromContext(ctx)
		for _, uid := range gone {
			if ctx.Err() != nil {
				return
			}
			if err := m.Unprepare(ctx, uid); err != nil {
				logger.Info("Unpreparing the claims of a pod that is gone failed, will retry", "podUID", uid, "err", err)
			}
		}
	}()
}

// Waiting returns the last failure to prepare the pod's claims: the claim and driver it was at (either may
// be empty) and the error. All empty when the pod's last Prepare succeeded or it has not failed.
func (m *Manager) Waiting(pod types.UID) (claim, driver, lastError string) {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	f := m.waiting[pod]
	return f.claim, f.driver, f.err
}

func (m *Manager) setWaiting(pod types.UID, f *failure) {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	if f == nil {
		delete(m.waiting, pod)
		return
	}
	m.waiting[pod] = *f
}

func (m *Manager) markPrepareStart(pod types.UID, t time.Time) {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	if t.IsZero() {
		delete(m.prepareStarted, pod)
		delete(m.waiting, pod)
		return
	}
	m.prepareStarted[pod] = t
}
