package podsync

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/status"
)

// evictedStatus marks a status input as upstream's eviction manager marks an evicted pod: phase Failed,
// reason Evicted, the eviction's message, and the DisruptionTarget condition.
func evictedStatus(in *status.Input, message string) {
	in.FailReason, in.FailMessage = status.ReasonEvicted, message
	in.Disruption = &v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: v1.PodReasonTerminationByKubelet, Message: message}
}

// EvictPod terminates a pod for node pressure within grace seconds: its containers are stopped and its
// status becomes phase Failed, reason Evicted, with message. It returns once the pod's worker has the kill;
// the eviction manager waits for the pod to leave the active pods.
func (k *Kubelet) EvictPod(_ context.Context, pod *v1.Pod, grace int64, message string) error {
	if _, known := k.workers.state(pod.UID); !known {
		return fmt.Errorf("pod %s/%s is not running on this node", pod.Namespace, pod.Name)
	}
	k.evictions.add(pod.UID, message)
	g := max(grace, 0)
	k.workers.UpdatePod(podUpdate{typ: updateKill, pod: pod, grace: &g})
	return nil
}

// PodStopped reports whether a pod's worker has finished stopping its containers (or never knew it).
func (k *Kubelet) PodStopped(pod *v1.Pod) bool {
	st, known := k.workers.state(pod.UID)
	return !known || st >= stateTerminated
}

// PodCleanedUp reports whether a pod's worker has stopped its containers and cleaned up after them (its
// volumes unmounted, its cgroup removed), or never knew it: upstream's podResourcesAreReclaimed, which the
// eviction manager waits for before it observes again.
func (k *Kubelet) PodCleanedUp(pod *v1.Pod) bool { return k.workers.cleanedUp(pod.UID) }

// ReclaimDeadContainers removes, on the eviction manager's demand under disk pressure, what upstream's
// container GC removes when it evicts non-deleted pods: the stopped containers and sandboxes of pods that
// have terminated but are not deleted yet (their final status stays in the API; their writable layers and
// logs go). Running pods keep only the previous instance of each container anyway (pruneDead). It returns how
// many containers and sandboxes it removed.
func (k *Kubelet) ReclaimDeadContainers(ctx context.Context) (int, error) {
	var n int
	var errs []error
	for uid, info := range k.workers.known() {
		if info.state != stateTerminated {
			continue
		}
		state, err := k.pleg.Cache().Get(uid)
		if err != nil || state == nil {
			continue
		}
		for _, c := range state.Containers {
			if c.State != runtimeapi.ContainerState_CONTAINER_EXITED && c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
				continue
			}
			if err := k.runtime.RemoveContainer(ctx, c.Id); err != nil {
				errs = append(errs, fmt.Errorf("remove container %s: %w", c.Id, err))
				continue
			}
			n++
		}
		for _, sb := range state.Sandboxes {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				continue
			}
			if err := k.runtime.RemovePodSandbox(ctx, sb.Id); err != nil {
				errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}
