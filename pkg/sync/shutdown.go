package podsync

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/status"
)

// terminationSet holds the pods the kubelet itself terminates (for the node's shutdown, for eviction), with
// the message their status carries.
type terminationSet struct {
	mu   sync.Mutex
	uids map[types.UID]string
}

func (s *terminationSet) add(uid types.UID, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uids == nil {
		s.uids = map[types.UID]string{}
	}
	s.uids[uid] = message
}

func (s *terminationSet) get(uid types.UID) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.uids[uid]
	return m, ok
}

func (s *terminationSet) has(uid types.UID) bool {
	_, ok := s.get(uid)
	return ok
}

// forget drops what the set holds of a pod that is gone.
func (s *terminationSet) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.uids, uid)
}

// Upstream's words for a pod terminated by the node's shutdown.
const (
	shutdownPodReason  = "Terminated"
	shutdownPodMessage = "Pod was terminated in response to imminent node shutdown."
)

// shutdownStatus marks a status input as upstream marks a pod the node's shutdown terminates: phase Failed,
// reason Terminated, and the DisruptionTarget condition.
func shutdownStatus(in *status.Input) {
	in.FailReason, in.FailMessage = shutdownPodReason, shutdownPodMessage
	in.Disruption = &v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: v1.PodReasonTerminationByKubelet, Message: shutdownPodMessage}
}

// ShutdownPod terminates pod for the node's shutdown within grace, and returns once its containers have
// stopped and its final status has reached the API (or ctx ends): the node may power off right after.
func (k *Kubelet) ShutdownPod(ctx context.Context, pod *v1.Pod, grace time.Duration) error {
	k.shutdowns.add(pod.UID, shutdownPodMessage)
	g := int64(max(grace, 0) / time.Second)
	k.workers.UpdatePod(podUpdate{typ: updateKill, pod: pod, grace: &g})
	t := k.clock.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if k.PodStopped(pod) {
			if k.cfg.Client == nil || k.status.Synced(pod.UID) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
}
