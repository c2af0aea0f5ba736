package config

import (
	"context"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// runOffline waits Offline.Grace for the API source's initial list; without it, the checkpointed pods that
// Offline.Runs selects become the API source's pods (sent as added), until the API server answers (see
// reconcileOffline). Nothing is removed because the API server is away.
func (s *Sources) runOffline(ctx context.Context) {
	logger := klog.FromContext(ctx)
	select {
	case <-ctx.Done():
		return
	case <-s.opts.Clock.After(s.opts.Offline.Grace):
	}
	pods, errs := s.opts.Checkpoint.Pods()
	for _, err := range errs {
		logger.Error(err, "A checkpointed pod cannot be read: it does not run offline")
	}
	s.mu.Lock()
	if s.synced[SourceAPI] {
		s.mu.Unlock()
		return
	}
	m := s.sourcePods(SourceAPI)
	var run []*v1.Pod
	var names []string
	for _, p := range pods {
		if _, known := m[p.UID]; known || !s.opts.Offline.Runs(p) {
			continue
		}
		m[p.UID] = p
		s.fromCheckpoint[p.UID] = true
		run = append(run, p)
		names = append(names, p.Namespace+"/"+p.Name)
	}
	sort.Strings(names)
	s.offline = &OfflineState{Since: s.opts.Clock.Now(), Pods: names}
	s.mu.Unlock()
	logger.Info("The API server has not answered: running pods from the node's checkpoint until it does",
		"gracePeriod", s.opts.Offline.Grace, "checkpointed", len(pods), "running", names)
	for _, p := range run {
		s.send(ctx, PodUpdate{Op: Add, Pods: []*v1.Pod{p}, Source: SourceAPI})
	}
}

// Offline returns what the node runs from its checkpoint while its API server is away; false when it does
// not (the API server answered, or the grace period has not passed).
func (s *Sources) Offline() (OfflineState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offline == nil {
		return OfflineState{}, false
	}
	return OfflineState{Since: s.offline.Since, Pods: append([]string(nil), s.offline.Pods...)}, true
}

// reconcileOffline is called once the API source has delivered its initial list, present holding the UIDs
// of its pods: a pod that ran from the checkpoint and is no longer bound to the node (deleted, or bound
// elsewhere meanwhile) is removed (stopped with its grace period), with a log line and an event saying why;
// the checkpoint forgets every pod the API server no longer has for the node. present is read after the
// list: a pod the API server delivered since (bound just as the node started) may be missing from it, and is
// kept, as is its checkpoint.
func (s *Sources) reconcileOffline(ctx context.Context, present map[types.UID]bool) {
	if s.opts.Checkpoint == nil {
		return
	}
	logger := klog.FromContext(ctx)
	s.mu.Lock()
	wasOffline := s.offline != nil
	s.offline = nil
	m := s.sourcePods(SourceAPI)
	var gone []*v1.Pod
	for uid, p := range m {
		if !present[uid] && s.fromCheckpoint[uid] {
			delete(m, uid)
			gone = append(gone, p)
		}
	}
	clear(s.fromCheckpoint)
	delivered := make(map[types.UID]bool, len(m))
	for uid := range m {
		delivered[uid] = true
	}
	s.mu.Unlock()
	if wasOffline {
		logger.Info("The API server answered: pods come from it again", "noLongerBound", len(gone))
	}
	for _, p := range gone {
		logger.Info("A pod run from the checkpoint is no longer bound to this node: stopping it", "pod", klog.KObj(p))
		s.opts.Recorder.Eventf(p, v1.EventTypeNormal, "NoLongerBound",
			"Stopping the pod started while the API server was away: it is no longer bound to this node")
		s.send(ctx, PodUpdate{Op: Remove, Pods: []*v1.Pod{p}, Source: SourceAPI})
	}
	kept, _ := s.opts.Checkpoint.Pods()
	for _, p := range kept {
		if !present[p.UID] && !delivered[p.UID] {
			s.checkpoint.put(ctx, p.UID, nil)
		}
	}
}
