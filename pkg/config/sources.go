package config

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// FileResync is how often the manifest directory is re-listed even without a change notification.
const FileResync = 20 * time.Second

// Options configure the pod sources.
type Options struct {
	NodeName string
	// Client, when set, adds the API server source.
	Client kubeclient.Interface
	// ManifestDir, when set, adds the static manifest source.
	ManifestDir string
	Clock       clock.WithTicker
	Recorder    record.EventRecorder
	// Checkpoint, when set, records the API source's pods as they come and go (see PodCheckpoint).
	Checkpoint PodCheckpoint
	// Offline, when its Runs is set (and Checkpoint is), serves the checkpointed pods it selects once the API
	// source has not delivered its initial list within Offline.Grace.
	Offline Offline
}

// PodCheckpoint keeps the pods bound to the node as last seen from the API server (offline.Store).
type PodCheckpoint interface {
	PutPod(pod *v1.Pod) error
	DeletePod(uid types.UID) error
	Pods() ([]*v1.Pod, []error)
}

// Offline says which checkpointed pods run while the API server is away, and after how long.
type Offline struct {
	Grace time.Duration
	Runs  func(*v1.Pod) bool
}

// OfflineState is what the node runs from its checkpoint: since when, and which pods (namespace/name).
type OfflineState struct {
	Since time.Time
	Pods  []string
}

// Sources merges the API and file sources into one stream of PodUpdates. Updates carry only real changes:
// a source that repeats a pod unchanged (an informer relisting after a disconnect, a file re-read) produces
// nothing, and a change of status alone is a Reconcile. Safe for concurrent use.
type Sources struct {
	opts    Options
	updates chan PodUpdate

	mu      sync.Mutex
	pods    map[string]map[types.UID]*v1.Pod // by source
	synced  map[string]bool                  // sources that delivered their initial list
	offline *OfflineState                    // set while the checkpoint serves the API source's pods
	// The API source's pods that came from the checkpoint (runOffline) and not yet from the API server: the
	// only ones reconcileOffline may remove.
	fromCheckpoint map[types.UID]bool
	checkpoint     *checkpointWriter // nil without a checkpoint
}

// NewSources returns the sources opts asks for. With neither a client nor a manifest directory it still
// works: no pods ever arrive.
func NewSources(opts Options) (*Sources, error) {
	if opts.NodeName == "" {
		return nil, errors.New("node name is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	s := &Sources{
		opts:           opts,
		updates:        make(chan PodUpdate, 64),
		pods:           map[string]map[types.UID]*v1.Pod{},
		synced:         map[string]bool{},
		fromCheckpoint: map[types.UID]bool{},
	}
	if opts.Checkpoint != nil {
		s.checkpoint = newCheckpointWriter(opts.Checkpoint)
	}
	if opts.Client != nil {
		s.synced[SourceAPI] = false
	}
	if opts.ManifestDir != "" {
		s.synced[SourceFile] = false
	}
	return s, nil
}

// Updates returns the merged stream.
func (s *Sources) Updates() <-chan PodUpdate { return s.updates }

// Synced reports whether every source has delivered its initial list. A receiver of Updates that must know
// it has applied those lists waits for the SourceSynced updates instead: Synced turns true before they are
// received.
func (s *Sources) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ok := range s.synced {
		if !ok {
			return false
		}
	}
	return true
}

// Run runs every source until ctx is done.
func (s *Sources) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if s.opts.Client != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			newAPISource(s.opts.Client, s.opts.NodeName, s, s.opts.Clock).run(ctx)
		}()
	}
	if s.opts.ManifestDir != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			newFileSource(s.opts, s).run(ctx)
		}()
	}
	if s.checkpoint != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.checkpoint.run(ctx)
		}()
	}
	if s.opts.Client != nil && s.opts.Checkpoint != nil && s.opts.Offline.Runs != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runOffline(ctx)
		}()
	}
	wg.Wait()
}

// markSynced records that source delivered its initial list and, the first time, sends SourceSynced behind
// the updates of that list. The caller must have sent them (replace, upsert) before it calls markSynced.
func (s *Sources) markSynced(ctx context.Context, source string) {
	s.mu.Lock()
	first := !s.synced[source]
	s.synced[source] = true
	s.mu.Unlock()
	if first {
		s.send(ctx, PodUpdate{Op: SourceSynced, Source: source})
	}
}

// upsert records one pod of a source and sends what changed.
func (s *Sources) upsert(ctx context.Context, source string, pod *v1.Pod) {
	s.mu.Lock()
	m := s.sourcePods(source)
	old, ok := m[pod.UID]
	m[pod.UID] = pod
	if source == SourceAPI {
		delete(s.fromCheckpoint, pod.UID) // the API server has it: never removed as a checkpoint's leftover
	}
	s.mu.Unlock()
	op, changed := classify(old, ok, pod)
	if changed && source == SourceAPI {
		s.keep(ctx, old, op, pod)
	}
	if changed {
		s.send(ctx, PodUpdate{Op: op, Pods: []*v1.Pod{pod}, Source: source})
	}
}

// keep records an API pod's change in the checkpoint: every change but one of its status alone, which is
// recorded only when its phase changes (a finished pod must not run again from the checkpoint). Mirror pods
// are their static pods' business.
func (s *Sources) keep(ctx context.Context, old *v1.Pod, op Op, pod *v1.Pod) {
	if s.opts.Checkpoint == nil || podfacts.IsMirror(pod) {
		return
	}
	if op == Reconcile && old != nil && old.Status.Phase == pod.Status.Phase {
		return
	}
	s.checkpoint.put(ctx, pod.UID, pod)
}

// remove forgets one pod of a source and sends its removal.
func (s *Sources) remove(ctx context.Context, source string, pod *v1.Pod) {
	s.mu.Lock()
	m := s.sourcePods(source)
	old, ok := m[pod.UID]
	delete(m, pod.UID)
	if source == SourceAPI {
		delete(s.fromCheckpoint, pod.UID)
	}
	s.mu.Unlock()
	if source == SourceAPI && s.checkpoint != nil {
		s.checkpoint.put(ctx, pod.UID, nil)
	}
	if ok {
		s.send(ctx, PodUpdate{Op: Remove, Pods: []*v1.Pod{old}, Source: source})
	}
}

// replace sets the full list of a source and sends the differences.
func (s *Sources) replace(ctx context.Context, source string, pods []*v1.Pod) {
	s.mu.Lock()
	m := s.sourcePods(source)
	next := make(map[types.UID]*v1.Pod, len(pods))
	var updates []PodUpdate
	for _, p := range pods {
		next[p.UID] = p
		old, ok := m[p.UID]
		if op, changed := classify(old, ok, p); changed {
			updates = append(updates, PodUpdate{Op: op, Pods: []*v1.Pod{p}, Source: source})
		}
	}
	for uid, old := range m {
		if _, ok := next[uid]; !ok {
			updates = append(updates, PodUpdate{Op: Remove, Pods: []*v1.Pod{old}, Source: source})
		}
	}
	s.pods[source] = next
	s.mu.Unlock()
	for _, u := range updates {
		s.send(ctx, u)
	}
}

func (s *Sources) sourcePods(source string) map[types.UID]*v1.Pod {
	m, ok := s.pods[source]
	if !ok {
		m = map[types.UID]*v1.Pod{}
		s.pods[source] = m
	}
	return m
}

func (s *Sources) send(ctx context.Context, u PodUpdate) {
	select {
	case s.updates <- u:
	case <-ctx.Done():
	}
}

// classify says what changed between the stored pod (if any) and the new one: Add for a new pod, Delete when
// deletion was just requested, Update for a change the kubelet acts on, Reconcile for a status change alone.
func classify(old *v1.Pod, known bool, cur *v1.Pod) (Op, bool) {
	if !known {
		return Add, true
	}
	if old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil {
		return Delete, true
	}
	if !equality.Semantic.DeepEqual(old.Spec, cur.Spec) ||
		!equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Annotations, cur.Annotations) ||
		!equality.Semantic.DeepEqual(old.DeletionGracePeriodSeconds, cur.DeletionGracePeriodSeconds) ||
		!equality.Semantic.DeepEqual(old.OwnerReferences, cur.OwnerReferences) {
		return Update, true
	}
	if !equality.Semantic.DeepEqual(old.Status, cur.Status) {
		return Reconcile, true
	}
	return Update, false
}
