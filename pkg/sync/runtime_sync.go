package podsync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	grpcstatus "google.golang.org/grpc/status"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/pkg/containerlogs"
	"github.com/nodeagent/kubelet/pkg/metrics"
	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/podspec"
	"github.com/nodeagent/kubelet/pkg/status"
)

// runtimeResult is what syncRuntime did.
type runtimeResult struct {
	changed        bool          // the runtime was changed
	killed         bool          // a container the state showed running was killed: the state is stale
	reasonsChanged bool          // a container's waiting reason was set or cleared
	requeue        time.Duration // sync again after this long (a back-off ends)
	err            error
	resizeErr      error // applying a resize to the running containers failed
}

func (r *runtimeResult) fail(err error) {
	r.err = errors.Join(r.err, err)
}

func (r *runtimeResult) requeueIn(d time.Duration) {
	if d > 0 && (r.requeue == 0 || d < r.requeue) {
		r.requeue = d
	}
}

// syncRuntime applies computePodActions: kill what must go, create the sandbox, start ephemeral
// containers, init containers in order, then app containers.
func (k *Kubelet) syncRuntime(ctx context.Context, pod *v1.Pod, state *pleg.PodState, cgroupParent string, mount *pendingMount, actuated map[string]v1.ResourceRequirements) runtimeResult {
	var r runtimeResult
	a := computePodActions(pod, state)
	addResizeRestarts(&a, pod, state, actuated)
	k.addProbeKills(&a, pod, state)
	if n, err := k.resizeRunning(ctx, pod, state, actuated); n > 0 || err != nil {
		r.changed, r.reasonsChanged, r.resizeErr = true, true, err
	}
	if a.CreateSandbox || len(a.InitToStart)+len(a.ContainersToStart)+len(a.EphemeralToStart) > 0 {
		k.starting.Add(1)
		defer k.starting.Add(-1)
	}
	if a.KillPod {
		if a.SandboxChanged && a.CreateSandbox {
			k.recorder.Event(podRef(pod, ""), v1.EventTypeNormal, eventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
		}
		if len(runningContainers(state))+len(readySandboxes(state)) > 0 {
			r.changed = true
			if err := k.killPod(ctx, pod, state, gracePeriodOf(pod, nil, state)); err != nil {
				r.fail(fmt.Errorf("kill pod: %w", err))
				return r
			}
		}
		if !a.CreateSandbox {
			return r
		}
	}
	for id, ki := range a.ContainersToKill {
		r.changed = true
		cs := findByID(state, id)
		if cs == nil {
			continue
		}
		r.killed = true
		grace := gracePeriodOf(pod, nil, state)
		if ki.grace != nil && pod.DeletionGracePeriodSeconds == nil {
			grace = *ki.grace
		}
		if err := k.killContainer(ctx, pod, cs, grace, ki.message); err != nil {
			r.fail(err)
			return r
		}
	}
	if k.pruneDead(ctx, pod, state) {
		r.changed = true
	}

	env := &startEnv{sandboxID: a.SandboxID, state: state}
	if !a.CreateSandbox && len(a.InitToStart)+len(a.ContainersToStart)+len(a.EphemeralToStart) == 0 {
		return r // nothing to start: no sandbox config to build
	}
	if err := k.prepareClaims(ctx, pod); err != nil {
		r.fail(err)
		return r
	}
	userns, err := k.userNamespace(pod)
	if err != nil {
		k.recorder.Eventf(podRef(pod, ""), v1.EventTypeWarning, eventFailedCreateSandbox, "Failed to create pod sandbox: %v", err)
		r.fail(fmt.Errorf("user namespace: %w", err))
		return r
	}
	var dnsWarnings []podspec.DNSWarning
	env.sandboxConfig, dnsWarnings = k.sandboxConfig(pod, a.Attempt, cgroupParent, userns)
	if a.CreateSandbox {
		r.changed = true
		for _, w := range dnsWarnings { // once per sandbox, not per sync
			k.recorder.Event(podRef(pod, ""), v1.EventTypeWarning, w.Reason, w.Message)
		}
		if err := os.MkdirAll(k.podLogDir(pod), 0o755); err != nil {
			r.fail(fmt.Errorf("create pod log directory: %w", err))
			return r
		}
		t0 := k.clock.Now()
		id, err := k.runtime.RunPodSandbox(ctx, env.sandboxConfig, k.cfg.RuntimeHandler)
		if err != nil {
			metrics.StartedPodsErrors.Inc()
			k.recorder.Eventf(podRef(pod, ""), v1.EventTypeWarning, eventFailedCreateSandbox, "Failed to create pod sandbox: %v", err)
			r.fail(fmt.Errorf("create sandbox: %w", err))
			return r
		}
		failpoint.Hit(failpoint.AfterSandbox)
		metrics.StartedPods.Inc()
		env.sandboxID = id
		resp, err := k.runtime.PodSandboxStatus(ctx, id, false)
		if err != nil {
			r.fail(fmt.Errorf("sandbox status: %w", err))
			return r
		}
		env.podIPs = sandboxIPs(resp.GetStatus())
		k.debug.step(pod.UID, "sandbox and network", strings.Join(env.podIPs, ", "), t0, k.clock.Now())
	} else {
		for _, sb := range state.Sandboxes {
			if sb.Id == a.SandboxID {
				env.podIPs = sandboxIPs(sb)
			}
		}
	}

	if env.volumes, err = mount.wait(); err != nil {
		return r // syncPod reports the volumes' failure; no container starts without its volumes
	}
	env.imageVolumes = k.pullImageVolumes(ctx, pod, env.sandboxConfig)
	// Ephemeral containers first, as upstream: a debug container starts even when an init container fails.
	for _, i := range a.EphemeralToStart {
		k.startContainer(ctx, pod, podspec.EphemeralSpec(pod, i), podspec.KindEphemeral, env, &r)
	}
	for _, i := range a.InitToStart {
		c := &pod.Spec.InitContainers[i]
		kind := podspec.KindInit
		if podfacts.IsSidecar(c) {
			kind = podspec.KindSidecar
		}
		if !k.startContainer(ctx, pod, c, kind, env, &r) && kind == podspec.KindInit {
			return r // the next init container waits for this one
		}
	}
	for _, i := range a.ContainersToStart {
		k.startContainer(ctx, pod, &pod.Spec.Containers[i], podspec.KindApp, env, &r)
	}
	return r
}

func sandboxIPs(sb *runtimeapi.PodSandboxStatus) []string {
	var out []string
	if ip := sb.GetNetwork().GetIp(); ip != "" {
		out = append(out, ip)
	}
	for _, ip := range sb.GetNetwork().GetAdditionalIps() {
		if ip.GetIp() != "" {
			out = append(out, ip.GetIp())
		}
	}
	return out
}

func findByID(state *pleg.PodState, id string) *runtimeapi.ContainerStatus {
	for _, c := range state.Containers {
		if c.Id == id {
			return c
		}
	}
	return nil
}

// backoffKey identifies a container's crash-loop back-off: a spec change starts afresh.
func backoffKey(pod *v1.Pod, c *v1.Container) string {
	return string(pod.UID) + "/" + c.Name + "/" + podspec.HashContainer(c)
}

// startContainer starts one container instance: back-off, image, config, create, start, postStart. It
// records why it could not in the reason cache and r, and reports whether the container started.
func (k *Kubelet) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, kind string, env *startEnv, r *runtimeResult) bool {
	ref := containerRef(pod, c)
	wait := func(reason, msg string) bool {
		k.reasons.set(pod.UID, c.Name, status.Waiting{Reason: reason, Message: msg})
		r.reasonsChanged = true
		return false
	}
	latest := first(byName(env.state, "")[c.Name])
	restartCount := int32(0)
	if latest != nil {
		restartCount = status.RestartCountOf(latest.Annotations) + 1
	} else {
		restartCount = k.logRestartCount(pod, c.Name)
	}

	if latest != nil && latest.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		key := backoffKey(pod, c)
		finished := time.Unix(0, latest.FinishedAt)
		if finished.Sub(time.Unix(0, latest.StartedAt)) < backoffReset {
			k.backoff.Seed(key, status.RestartCountOf(latest.Annotations), finished)
		}
		if in, left := k.backoff.InBackoff(key, finished, k.clock.Now()); in {
			k.recorder.Eventf(ref, v1.EventTypeWarning, eventBackOff, "Back-off restarting failed container %s in pod %s", c.Name, podspec.PodDesc(pod))
			r.requeueIn(left)
			return wait(status.ReasonCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s",
				k.backoff.Delay(key), c.Name, podspec.PodDesc(pod)))
		}
		k.backoff.Next(key, finished)
	}

	imageRef, waiting, retry := k.puller.ensureImage(ctx, pod, c, env.sandboxConfig)
	if waiting != nil {
		r.requeueIn(retry)
		if waiting.Reason != status.ReasonImagePullBackOff {
			r.fail(fmt.Errorf("container %q: %s: %s", c.Name, waiting.Reason, waiting.Message))
		}
		return wait(waiting.Reason, waiting.Message)
	}
	if waiting, retry := imageVolumeWaiting(c, env.imageVolumes); waiting != nil {
		r.requeueIn(retry)
		if waiting.Reason != status.ReasonImagePullBackOff {
			r.fail(fmt.Errorf("container %q: image volume: %s: %s", c.Name, waiting.Reason, waiting.Message))
		}
		return wait(waiting.Reason, waiting.Message)
	}
	cfg, err := k.containerConfig(ctx, pod, c, kind, restartCount, imageRef, env)
	if err != nil {
		k.recorder.Eventf(ref, v1.EventTypeWarning, eventFailed, "Error: %v", err)
		r.fail(fmt.Errorf("container %q config: %w", c.Name, err))
		return wait(status.ReasonCreateContainerConfigError, err.Error())
	}
	t0 := k.clock.Now()
	id, err := k.runtime.CreateContainer(ctx, env.sandboxID, cfg, env.sandboxConfig)
	if err != nil {
		k.recorder.Eventf(ref, v1.EventTypeWarning, eventFailed, "Error: %v", err)
		r.fail(fmt.Errorf("create container %q: %w", c.Name, err))
		return wait(status.ReasonCreateContainerError, err.Error())
	}
	failpoint.Hit(failpoint.AfterContainerCreate)
	r.changed = true
	if kind == podspec.KindEphemeral {
		// No resources of its own: it runs in the pod's cgroup, and resizes never concern it.
	} else if err := k.alloc.SetActuated(pod.UID, c.Name, c.Resources); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to checkpoint a container's resources", "pod", klog.KObj(pod), "container", c.Name)
	}
	k.recorder.Eventf(ref, v1.EventTypeNormal, eventCreated, "Created container: %s", c.Name)
	k.debug.step(pod.UID, "created "+c.Name, "", t0, k.clock.Now())
	t0 = k.clock.Now()
	if err := k.runtime.StartContainer(ctx, id); err != nil {
		metrics.StartedContainersErrors.WithLabelValues(podspec.ContainerType(kind), grpcstatus.Code(err).String()).Inc()
		k.recorder.Eventf(ref, v1.EventTypeWarning, eventFailed, "Error: %v", err)
		r.fail(fmt.Errorf("start container %q: %w", c.Name, err))
		return wait(status.ReasonRunContainerError, err.Error())
	}
	metrics.StartedContainers.WithLabelValues(podspec.ContainerType(kind)).Inc()
	k.debug.step(pod.UID, "started "+c.Name, "", t0, k.clock.Now())
	if k.cfg.ContainerStarted != nil {
		k.cfg.ContainerStarted(containerlogs.Container{ID: id, Name: c.Name, Pod: pod.Name, Namespace: pod.Namespace,
			LogPath: filepath.Join(env.sandboxConfig.LogDirectory, cfg.LogPath)})
	}
	k.recorder.Eventf(ref, v1.EventTypeNormal, eventStarted, "Started container %s", c.Name)
	if _, had := k.reasons.get(pod.UID)[c.Name]; had {
		k.reasons.clear(pod.UID, c.Name)
		r.reasonsChanged = true
	}
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		t0 = k.clock.Now()
		err := k.runHook(ctx, pod, c, id, c.Lifecycle.PostStart, 0)
		k.debug.step(pod.UID, "postStart "+c.Name, errString(err), t0, k.clock.Now())
		if err != nil {
			msg := fmt.Sprintf("PostStartHook failed: %v", err)
			k.recorder.Event(ref, v1.EventTypeWarning, eventFailedPostStartHook, msg)
			cs := &runtimeapi.ContainerStatus{Id: id, Metadata: cfg.Metadata, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Annotations: cfg.Annotations}
			if kerr := k.killContainer(ctx, pod, cs, gracePeriodOf(pod, nil, nil), "FailedPostStartHook"); kerr != nil {
				klog.FromContext(ctx).Error(kerr, "Failed to kill container after its postStart hook failed", "pod", klog.KObj(pod), "container", c.Name)
			}
			r.fail(fmt.Errorf("container %q: %s", c.Name, msg))
			return false
		}
	}
	return true
}

// pruneDead removes exited containers beyond the newest two of each name (the newest dead one gives
// lastState), never-started ones that are not their name's newest (a newer instance exists, so they will
// never start: a start cut off by containerd's death leaves them), and exited sandboxes that are not the
// newest and hold nothing kept. It reports whether it removed anything.
func (k *Kubelet) pruneDead(ctx context.Context, pod *v1.Pod, state *pleg.PodState) bool {
	logger := klog.FromContext(ctx)
	kept := map[string]bool{}
	removed := false
	for _, list := range byName(state, "") {
		for i, c := range list {
			if !deadInstance(i, c.State) {
				kept[state.SandboxOf[c.Id]] = true
				continue
			}
			if err := k.runtime.RemoveContainer(ctx, c.Id); err != nil {
				logger.V(2).Info("Failed to remove dead container", "pod", klog.KObj(pod), "containerID", c.Id, "err", err)
				kept[state.SandboxOf[c.Id]] = true
				continue
			}
			removed = true
		}
	}
	for i, sb := range sortedSandboxes(state) {
		if i == 0 || sb.State == runtimeapi.PodSandboxState_SANDBOX_READY || kept[sb.Id] {
			continue
		}
		if err := k.runtime.RemovePodSandbox(ctx, sb.Id); err != nil {
			logger.V(2).Info("Failed to remove dead sandbox", "pod", klog.KObj(pod), "sandboxID", sb.Id, "err", err)
			continue
		}
		removed = true
	}
	return removed
}

// deadInstance says whether the i-th instance (newest first) of a container is one pruneDead removes.
func deadInstance(i int, state runtimeapi.ContainerState) bool {
	switch state {
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return i >= 2
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return i >= 1
	}
	return false
}
