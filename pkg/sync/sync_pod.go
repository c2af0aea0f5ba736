package podsync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/pkg/allocation"
	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/status"
	"github.com/nodeagent/kubelet/pkg/volume"
)

var _ podSyncer = (*Kubelet)(nil)

// statusInput gathers what status.Compute needs for pod from its runtime state.
func (k *Kubelet) statusInput(pod *v1.Pod, state *pleg.PodState) status.Input {
	prev, ok := k.status.PodStatus(pod.UID)
	if !ok {
		prev = *pod.Status.DeepCopy()
	}
	in := status.Input{
		Pod: pod, Previous: &prev, Waiting: k.reasons.get(pod.UID),
		HostIPs: k.cfg.NodeIPs(), RuntimeName: k.cfg.RuntimeName, Now: k.clock.Now(),
		Resize: k.resizeStatus(pod, state), Probe: k.probeStatus(pod), DeviceHealth: k.cfg.DeviceHealth,
	}
	if hasReadOnlyMount(pod) { // only such pods need the runtime's answer
		in.RecursiveReadOnly = k.cachedRecursiveReadOnly()
	}
	if state != nil {
		in.Sandboxes, in.Containers = state.Sandboxes, state.Containers
	}
	if k.shutdowns.has(pod.UID) {
		shutdownStatus(&in)
	}
	if msg, ok := k.evictions.get(pod.UID); ok {
		evictedStatus(&in, msg)
	}
	return in
}

// deadlineLeft returns how long the pod may still be active (activeDeadlineSeconds), and false when it has
// none.
func (k *Kubelet) deadlineLeft(pod *v1.Pod, st *v1.PodStatus) (time.Duration, bool) {
	if pod.Spec.ActiveDeadlineSeconds == nil || st.StartTime == nil {
		return 0, false
	}
	d := time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second
	return d - k.clock.Since(st.StartTime.Time), true
}

// syncPod makes the runtime match a pod that should run, and reports its status.
func (k *Kubelet) syncPod(ctx context.Context, pod *v1.Pod, state *pleg.PodState) (syncOutcome, error) {
	pod = k.allocatedPod(pod)
	in := k.statusInput(pod, state)
	st := status.Compute(in)
	if left, ok := k.deadlineLeft(pod, &st); ok && left <= 0 && !isTerminalPhase(st.Phase) {
		k.recorder.Event(podRef(pod, ""), v1.EventTypeNormal, eventDeadlineExceeded, status.MessageDeadline)
		in.FailReason, in.FailMessage = status.ReasonDeadlineExceeded, status.MessageDeadline
		st = status.Compute(in)
	}
	k.setStatus(pod, in.Previous, st)
	now := k.clock.Now()
	k.starts.synced(pod, &st, now)
	if !pod.CreationTimestamp.IsZero() {
		k.debug.step(pod.UID, "admitted", "", pod.CreationTimestamp.Time, now)
	}
	if allRunning(&st) && podReady(&st) {
		k.debug.step(pod.UID, "ready", "", now, now)
	}
	if isTerminalPhase(st.Phase) {
		return syncOutcome{terminal: true}, nil
	}
	if podfacts.IsStatic(pod) {
		k.ensureMirror(ctx, pod)
	}
	if err := k.makePodDirs(pod); err != nil {
		return syncOutcome{}, err
	}
	// A resize raises the pod cgroup before its containers and lowers it after them.
	actuated := k.actuated(pod, state)
	upper := allocation.UpperBound(pod, actuated)
	t0 := k.clock.Now()
	cgroupParent, err := k.cgroups.EnsurePod(ctx, upper)
	k.debug.step(pod.UID, "pod cgroup", cgroupParent, t0, k.clock.Now())
	if err != nil {
		k.recorder.Eventf(podRef(pod, ""), v1.EventTypeWarning, eventFailedCreatePodCgroups, "unable to ensure pod container exists: %v", err)
		return syncOutcome{}, fmt.Errorf("ensure pod cgroup: %w", err)
	}
	failpoint.Hit(failpoint.AfterPodCgroup)
	beside := len(readySandboxes(state)) == 0 // the volumes are mounted while the sandbox is created
	mount := k.mountVolumes(ctx, pod, beside)
	if !beside {
		if _, err := mount.wait(); err != nil {
			k.recordMountFailure(pod, err)
			return syncOutcome{}, fmt.Errorf("mount volumes: %w", err)
		}
	}

	res := k.syncRuntime(ctx, pod, state, cgroupParent, mount, actuated)
	if _, err := mount.wait(); err != nil { // the sandbox was created meanwhile; the containers wait
		k.recordMountFailure(pod, err)
		return syncOutcome{changed: res.changed}, errors.Join(fmt.Errorf("mount volumes: %w", err), res.err)
	}
	if res.resizeErr == nil && upper != pod {
		if _, err := k.cgroups.EnsurePod(ctx, pod); err != nil {
			res.resizeErr = fmt.Errorf("resize pod cgroup: %w", err)
		}
	}
	if k.finishResize(ctx, pod, state, res.resizeErr, res.killed) {
		res.reasonsChanged = true
	}
	k.syncProbes(pod, state, st.PodIP)
	if res.reasonsChanged {
		in := k.statusInput(pod, state)
		k.setStatus(pod, in.Previous, status.Compute(in))
	}
	out := syncOutcome{changed: res.changed, requeue: res.requeue}
	if left, ok := k.deadlineLeft(pod, &st); ok && (out.requeue == 0 || left < out.requeue) {
		out.requeue = max(left, time.Millisecond)
	}
	return out, res.err
}

// recordMountFailure records a FailedMount event per volume that could not be set up, worded as upstream's
// ("MountVolume.SetUp failed for volume ..."), or one for the pod's volumes as a whole. The pod stays
// ContainerCreating and the sync is retried.
func (k *Kubelet) recordMountFailure(pod *v1.Pod, err error) {
	var each []error
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		each = joined.Unwrap()
	} else {
		each = []error{err}
	}
	for _, e := range each {
		var se *volume.SetupError
		if errors.As(e, &se) {
			k.recorder.Event(podRef(pod, ""), v1.EventTypeWarning, eventFailedMountVolume, se.Error())
			continue
		}
		k.recorder.Eventf(podRef(pod, ""), v1.EventTypeWarning, eventFailedMountVolume, "Unable to attach or mount volumes: %v", e)
	}
}

func isTerminalPhase(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

func (k *Kubelet) makePodDirs(pod *v1.Pod) error {
	for _, d := range []string{"volumes", "plugins", "containers"} {
		if err := os.MkdirAll(filepath.Join(k.podDir(pod.UID), d), 0o750); err != nil {
			return fmt.Errorf("create pod directory: %w", err)
		}
	}
	return nil
}

// ensureMirror makes the API hold an up-to-date mirror pod of a static pod.
func (k *Kubelet) ensureMirror(ctx context.Context, pod *v1.Pod) {
	if k.mirrors == nil {
		return
	}
	logger := klog.FromContext(ctx)
	hash := pod.Annotations[podfacts.AnnotationConfigHash]
	mirror, ok := k.pods.mirror(pod.Namespace, pod.Name)
	// A mirror left terminal by an earlier run (the node shut down, the pod was evicted) cannot show this run:
	// the API never moves a pod out of a terminal phase. It is replaced, as one of another spec is.
	stale := ok && isTerminalPhase(mirror.Status.Phase)
	if ok && (stale || mirror.Annotations[podfacts.AnnotationConfigMirror] != hash || mirror.DeletionTimestamp != nil) {
		if mirror.DeletionTimestamp == nil {
			logger.Info("Deleting outdated mirror pod", "pod", klog.KObj(pod), "terminal", stale)
			if err := k.mirrors.DeleteMirror(ctx, mirror.Namespace, mirror.Name, mirror.UID); err != nil {
				logger.Error(err, "Failed to delete mirror pod", "pod", klog.KObj(pod))
			}
		}
		return // recreated once the deletion shows up
	}
	if !ok {
		if err := k.mirrors.CreateMirror(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			logger.Error(err, "Failed to create mirror pod", "pod", klog.KObj(pod))
		}
	}
}

// syncTerminatingPod stops everything of the pod within its grace period.
func (k *Kubelet) syncTerminatingPod(ctx context.Context, pod *v1.Pod, state *pleg.PodState, grace *int64) error {
	k.probes.RemovePod(pod.UID) // nothing is restarted or probed while the pod stops
	if _, known := k.pods.get(pod.UID); known {
		in := k.statusInput(pod, state)
		k.setStatus(pod, in.Previous, status.Compute(in))
	}
	return k.killPod(ctx, pod, state, gracePeriodOf(pod, grace, state))
}

// syncTerminatedPod releases what a stopped pod holds. The pod's cgroup and volumes go at once; its
// sandbox, containers, directories and logs stay (for logs) until the pod is deleted. As upstream, a deleted
// pod's removal from the API is confirmed once nothing of it runs and its volumes and cgroup are released;
// its stopped sandbox and containers are removed after that (a failed removal is retried).
func (k *Kubelet) syncTerminatedPod(ctx context.Context, pod *v1.Pod, state *pleg.PodState, deleted bool) error {
	k.probes.RemovePod(pod.UID)
	if running, sandboxes := runningContainers(state), readySandboxes(state); len(running)+len(sandboxes) > 0 {
		if err := k.killPod(ctx, pod, state, 0); err != nil {
			return err
		}
		return fmt.Errorf("%d containers and %d sandboxes were still running", len(running), len(sandboxes))
	}
	if err := k.unprepareClaims(ctx, pod.UID); err != nil {
		return err
	}
	if err := volume.CleanSubPaths(filepath.Join(k.podDir(pod.UID), "volume-subpaths")); err != nil {
		return fmt.Errorf("unmount subPaths: %w", err)
	}
	if err := k.volumes.UnmountPod(ctx, pod.UID); err != nil {
		return fmt.Errorf("unmount volumes: %w", err)
	}
	if err := k.cgroups.RemovePod(ctx, pod.UID); err != nil {
		return fmt.Errorf("remove pod cgroup: %w", err)
	}
	_, known := k.pods.get(pod.UID)
	if known {
		in := k.statusInput(pod, state)
		in.Terminal = true
		k.status.SetPodStatus(pod, status.Compute(in))
	}
	if !deleted {
		return nil
	}
	switch {
	case known && pod.DeletionTimestamp != nil && !podfacts.IsStatic(pod):
		k.status.ConfirmDeletion(pod)
	case !known || podfacts.IsStatic(pod):
		k.status.Forget(pod.UID)
	}
	if err := k.removePodContent(ctx, pod, state); err != nil {
		return err
	}
	k.reasons.forget(pod.UID)
	k.evictions.forget(pod.UID)
	k.starts.forget(pod.UID)
	k.debug.forget(pod.UID)
	k.backoff.DeletePrefix(string(pod.UID) + "/")
	k.puller.forgetPod(pod.UID)
	return nil
}

// removePodContent removes the pod's containers and sandboxes from the runtime, and its directories.
func (k *Kubelet) removePodContent(ctx context.Context, pod *v1.Pod, state *pleg.PodState) error {
	var errs []error
	for _, c := range state.Containers {
		if err := k.runtime.RemoveContainer(ctx, c.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.Id, err))
		}
	}
	for _, sb := range state.Sandboxes {
		if err := k.runtime.RemovePodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if volume.HasMounts(k.podDir(pod.UID)) {
		return fmt.Errorf("pod directory %s still has mounts", k.podDir(pod.UID))
	}
	if err := os.RemoveAll(k.podDir(pod.UID)); err != nil {
		return fmt.Errorf("remove pod directory: %w", err)
	}
	if k.cfg.UserNamespaces != nil {
		k.cfg.UserNamespaces.Release(pod.UID) // its record went with the directory
	}
	if pod.Name != "" {
		if err := os.RemoveAll(k.podLogDir(pod)); err != nil {
			return fmt.Errorf("remove pod logs: %w", err)
		}
	}
	return nil
}

// runningContainers returns the containers of state that may be running (running or unknown). A created
// container that was never started (a kubelet killed between create and start leaves one) runs nothing:
// the kubelet never starts it (a sync creates a new instance instead, as upstream does), stopping it is a
// no-op in CRI, and it goes with its sandbox's removal.
func runningContainers(state *pleg.PodState) []*runtimeapi.ContainerStatus {
	if state == nil {
		return nil
	}
	var out []*runtimeapi.ContainerStatus
	for _, c := range state.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
			out = append(out, c)
		}
	}
	return out
}

// readySandboxes returns the sandboxes of state that are still ready.
func readySandboxes(state *pleg.PodState) []*runtimeapi.PodSandboxStatus {
	if state == nil {
		return nil
	}
	var out []*runtimeapi.PodSandboxStatus
	for _, s := range state.Sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			out = append(out, s)
		}
	}
	return out
}
