package podsync

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/internal/failpoint"
)

// eventFailedPrepareDynamicResources is upstream's event reason when a pod's claims could not be prepared.
const eventFailedPrepareDynamicResources = "FailedPrepareDynamicResources"

// errNoDRA refuses a pod with ResourceClaims on a kubelet built without dynamic resource allocation.
var errNoDRA = errors.New("the pod uses ResourceClaims but this kubelet has no dynamic resource allocation")

// prepareClaims has the pod's ResourceClaims prepared by their drivers before anything of the pod starts, as
// upstream's SyncPod does before RunPodSandbox. It is called whenever a container is about to start, so a
// claim the kubelet lost track of (a damaged checkpoint) is prepared again; a pod whose claims are all
// prepared returns at once. A failure leaves the pod waiting with upstream's event.
func (k *Kubelet) prepareClaims(ctx context.Context, pod *v1.Pod) error {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	if k.cfg.DRA == nil {
		return errNoDRA
	}
	t0 := k.clock.Now()
	if err := k.cfg.DRA.Prepare(ctx, pod); err != nil {
		k.recorder.Eventf(podRef(pod, ""), v1.EventTypeWarning, eventFailedPrepareDynamicResources,
			"Failed to prepare dynamic resources: %v", err)
		k.debug.step(pod.UID, "dynamic resources", "failed: "+err.Error(), t0, k.clock.Now())
		return fmt.Errorf("prepare dynamic resources: %w", err)
	}
	failpoint.Hit(failpoint.AfterDRAPrepare)
	k.debug.step(pod.UID, "dynamic resources", fmt.Sprintf("%d claims prepared", len(pod.Spec.ResourceClaims)), t0, k.clock.Now())
	return nil
}

// unprepareClaims has the claims of a pod whose containers are all gone unprepared by their drivers; an
// error keeps the pod terminating, to be tried again.
func (k *Kubelet) unprepareClaims(ctx context.Context, uid types.UID) error {
	if k.cfg.DRA == nil {
		return nil
	}
	if k.cfg.DRA.Holds(uid) {
		failpoint.Hit(failpoint.BeforeDRAUnprepare)
	}
	if err := k.cfg.DRA.Unprepare(ctx, uid); err != nil {
		return fmt.Errorf("unprepare dynamic resources: %w", err)
	}
	return nil
}

// setStatus records a running or terminating pod's status. A terminal phase waits while the pod's claims
// are still prepared, as upstream's status manager holds it: the claim controller frees a finished pod's
// devices for other pods, which the driver must have unprepared first. syncTerminatedPod, once it has
// unprepared them, records the terminal phase.
func (k *Kubelet) setStatus(pod *v1.Pod, prev *v1.PodStatus, st v1.PodStatus) {
	if isTerminalPhase(st.Phase) && !isTerminalPhase(prev.Phase) && k.cfg.DRA != nil && k.cfg.DRA.Holds(pod.UID) {
		st.Phase, st.Reason, st.Message = prev.Phase, prev.Reason, prev.Message
		if st.Phase == "" {
			st.Phase = v1.PodPending
		}
	}
	k.status.SetPodStatus(pod, st)
}

// ResyncPod has the pod synced soon (its status computed again): what its status shows changed outside the
// kubelet's view of the runtime, such as the health of its devices. It never blocks.
func (k *Kubelet) ResyncPod(uid types.UID) { k.probeChanged.add(uid) }
