package podsync

import (
	"context"
	"fmt"
	"runtime"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/admission"
	"github.com/nodeagent/kubelet/pkg/allocation"
	"github.com/nodeagent/kubelet/pkg/config"
	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/status"
)

// syncLoop is the kubelet's one select: source updates, PLEG events, the sync tick and housekeeping.
func (k *Kubelet) syncLoop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	k.workers.setContext(ctx)
	syncTicker := k.clock.NewTicker(syncPeriod)
	defer syncTicker.Stop()
	hkTicker := k.clock.NewTicker(housekeepingPeriod)
	defer hkTicker.Stop()
	updates := k.source.Updates()
	events := k.pleg.Watch()
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-updates:
			if !ok {
				logger.Info("Pod sources closed; no more pod updates")
				updates = nil
				continue
			}
			k.handleUpdate(ctx, u)
		case e := <-events:
			k.handlePLEGEvent(e)
		case <-k.probeChanged.signal:
			for _, uid := range k.probeChanged.take() {
				k.dispatchSync(uid)
			}
		case <-syncTicker.C():
			k.heartbeat()
			for _, uid := range k.workers.takeDue(k.clock.Now()) {
				k.dispatchSync(uid)
			}
		case <-hkTicker.C():
			k.heartbeat()
			if k.hkBusy.TryLock() {
				go func() {
					defer k.hkBusy.Unlock()
					k.housekeeping(ctx)
				}()
			}
		}
	}
}

// handleUpdate applies one source update.
func (k *Kubelet) handleUpdate(ctx context.Context, u config.PodUpdate) {
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Pod update", "op", u.Op.String(), "source", u.Source, "pods", len(u.Pods))
	if u.Op == config.SourceSynced {
		// Every update of this source's initial list is applied (it came ahead of this one in the stream).
		if k.source.Synced() && !k.sourcesReady.Swap(true) {
			logger.Info("All pod sources synced; pods running beyond them are now orphans", "source", u.Source)
		}
		return
	}
	k.orphanMu.RLock()
	defer k.orphanMu.RUnlock()
	pods := append([]*v1.Pod(nil), u.Pods...)
	sortByCreation(pods)
	for _, pod := range pods {
		switch u.Op {
		case config.Add, config.Update, config.Delete:
			k.pods.set(pod)
			if podfacts.IsMirror(pod) {
				k.status.Reconcile(pod)
				if static, ok := k.pods.staticByName(pod.Namespace, pod.Name); ok {
					k.dispatchSync(static.UID) // check the mirror against its static pod
				}
				continue
			}
			if u.Op != config.Add {
				k.status.Reconcile(pod)
			}
			if u.Op == config.Add && podfacts.IsStatic(pod) {
				if st, ok := k.workers.state(pod.UID); ok && st == stateFinished {
					k.workers.forget(pod.UID) // a static pod put back with the same content runs again
				}
			}
			k.applyPod(ctx, pod)
		case config.Remove:
			k.pods.remove(pod)
			if podfacts.IsMirror(pod) {
				if static, ok := k.pods.staticByName(pod.Namespace, pod.Name); ok {
					k.dispatchSync(static.UID) // recreate the mirror
				}
				continue
			}
			k.workers.UpdatePod(podUpdate{typ: updateKill, pod: pod, deleted: true})
		case config.Reconcile:
			k.pods.set(pod)
			k.status.Reconcile(pod)
			if status.NeedsReadinessReconcile(pod) {
				k.dispatchSync(pod.UID) // a readiness gate's condition changed
			}
		}
	}
}

// applyPod admits a pod the workers do not know yet, and hands it to its worker.
func (k *Kubelet) applyPod(ctx context.Context, pod *v1.Pod) {
	if k.pods.isRejected(pod.UID) {
		if pod.DeletionTimestamp != nil && !podfacts.IsStatic(pod) {
			k.status.ConfirmDeletion(pod) // it never ran: nothing to stop
		}
		return
	}
	if pod.DeletionTimestamp != nil {
		k.workers.UpdatePod(podUpdate{typ: updateKill, pod: pod, grace: pod.DeletionGracePeriodSeconds, deleted: true})
		return
	}
	if _, known := k.workers.state(pod.UID); !known {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			// Finished before: make sure nothing runs, never start it again.
			k.workers.UpdatePod(podUpdate{typ: updateKill, pod: pod})
			return
		}
		if res := k.admitNew(ctx, pod); !res.Admit {
			k.rejectPod(ctx, pod, res)
			return
		}
	}
	k.workers.UpdatePod(podUpdate{typ: updateSync, pod: pod})
}

// admitNew admits a pod the kubelet does not run yet: its containers' devices are allocated first (as
// upstream's resource allocation handler runs before its predicates), then admit.
func (k *Kubelet) admitNew(ctx context.Context, pod *v1.Pod) admission.Result {
	if k.cfg.Devices != nil {
		// Devices of pods gone are freed only once every source has synced: before, a pod not admitted yet
		// after a restart is not gone. The active pods are listed only for a pod that asks for devices.
		var active func() []types.UID
		if k.sourcesReady.Load() {
			active = func() []types.UID {
				var uids []types.UID
				for uid, info := range k.workers.known() {
					if info.state == stateSyncing || info.state == stateTerminating {
						uids = append(uids, uid)
					}
				}
				return uids
			}
		}
		if err := k.cfg.Devices.Allocate(ctx, pod, active); err != nil {
			return admission.Result{Reason: "UnexpectedAdmissionError",
				Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
		}
	}
	return k.admit(pod)
}

// admit runs admission against the pods that are admitted and still running, with their allocated
// resources (a pod's resize also goes through it).
func (k *Kubelet) admit(pod *v1.Pod) admission.Result {
	var active []*v1.Pod
	for uid, info := range k.workers.known() {
		if uid == pod.UID || info.state != stateSyncing || info.pod == nil {
			continue
		}
		p := info.pod
		if alloc, ok := k.alloc.Allocated(uid); ok { // what it was given, not a resize not yet accepted
			p = allocation.WithAllocated(p, alloc)
		}
		active = append(active, p)
	}
	node := k.nodeInfo()
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SupplementalGroupsPolicy != nil && !node.Host.SupplementalGroupsPolicy {
		// Strict is admitted when the runtime reports it honours the policy, as upstream's kubelet admits by
		// the node's status.features, which its runtime's status fills. Asked only of a pod that sets it.
		node.Host.SupplementalGroupsPolicy = k.supportsSupplementalGroupsPolicy()
	}
	if podfacts.InUserNamespace(pod) {
		// As upstream, a pod that asks for a user namespace needs the runtime's handler to offer them.
		node.Host.UserNamespaces = k.cfg.UserNamespaces != nil && k.supportsUserNamespaces()
	}
	res := admission.Admit(pod, node, active)
	if res.Admit && k.cfg.PressureAdmit != nil {
		if ok, reason, msg := k.cfg.PressureAdmit(pod); !ok {
			return admission.Result{Reason: reason, Message: msg}
		}
	}
	return res
}

func (k *Kubelet) nodeInfo() admission.Node {
	n := admission.Node{
		Name:    k.cfg.NodeName,
		MaxPods: k.cfg.MaxPods,
		Host:    k.cfg.Host,
		Labels: map[string]string{
			v1.LabelHostname: k.cfg.NodeName, v1.LabelOSStable: runtime.GOOS, v1.LabelArchStable: runtime.GOARCH,
		},
	}
	if k.cfg.NodeAllocatable != nil {
		n.Allocatable = k.cfg.NodeAllocatable()
	}
	if k.cfg.Node != nil {
		if node := k.cfg.Node(); node != nil {
			n.Labels = node.Labels
			n.Taints = node.Spec.Taints
			n.Allocatable = withExtended(n.Allocatable, node.Status.Allocatable)
		}
	}
	if k.cfg.Devices != nil {
		n.Allocatable = atLeastHeld(n.Allocatable, k.cfg.Devices.Allocated())
	}
	return n
}

// atLeastHeld raises each device resource's allocatable to the devices containers hold of it, as upstream's
// sanitizeNodeAllocatable: a restarted kubelet re-admits its running pods before their device plugins have
// registered again, and must not refuse them for the devices they hold.
func atLeastHeld(alloc, held v1.ResourceList) v1.ResourceList {
	out, copied := alloc, false
	for name, q := range held {
		if cur, ok := alloc[name]; ok && cur.Cmp(q) >= 0 {
			continue
		}
		if !copied {
			out, copied = alloc.DeepCopy(), true
			if out == nil {
				out = v1.ResourceList{}
			}
		}
		out[name] = q.DeepCopy()
	}
	return out
}

// withExtended is the kubelet's allocatable with the extended resources the Node lists (advertised by an
// administrator on the Node's status, as upstream documents it), which the kubelet does not compute.
func withExtended(own, api v1.ResourceList) v1.ResourceList {
	out := own.DeepCopy()
	for name, q := range api {
		if _, mine := own[name]; !mine && podfacts.IsExtendedResource(name) {
			if out == nil {
				out = v1.ResourceList{}
			}
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// rejectPod fails a pod that admission refused: phase Failed with the reason, and an event. It never starts.
func (k *Kubelet) rejectPod(ctx context.Context, pod *v1.Pod, res admission.Result) {
	klog.FromContext(ctx).Info("Pod rejected by admission", "pod", klog.KObj(pod), "reason", res.Reason, "message", res.Message)
	k.pods.reject(pod.UID)
	k.recorder.Event(podRef(pod, ""), v1.EventTypeWarning, res.Reason, res.Message)
	st := status.Compute(status.Input{
		Pod: pod, Now: k.clock.Now(), HostIPs: k.cfg.NodeIPs(), RuntimeName: k.cfg.RuntimeName,
		FailReason: res.Reason, FailMessage: res.Message,
	})
	k.status.SetPodStatus(pod, st)
}

// handlePLEGEvent wakes the worker of the pod the event is about.
func (k *Kubelet) handlePLEGEvent(e *pleg.Event) {
	if e.Type == pleg.ContainerRemoved {
		return
	}
	k.dispatchSync(e.UID)
}

// dispatchSync asks a known pod's worker to sync with the pod's current spec.
func (k *Kubelet) dispatchSync(uid types.UID) {
	if pod, ok := k.pods.get(uid); ok {
		if k.pods.isRejected(uid) {
			return
		}
		k.workers.UpdatePod(podUpdate{typ: updateSync, pod: pod})
		return
	}
	if _, known := k.workers.state(uid); known {
		k.workers.UpdatePod(podUpdate{typ: updateSync, runningPod: &pleg.PodState{UID: uid}})
	}
}
