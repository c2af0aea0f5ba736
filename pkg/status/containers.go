package status

import (
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/podspec"
)

type containerInput struct {
	pod         *v1.Pod
	containers  []*runtimeapi.ContainerStatus // newest first
	waiting     map[string]Waiting
	runtimeName string
	probe       func(spec *v1.Container, id string) (started, ready bool)
	health      func(pod *v1.Pod, container string) []v1.ResourceStatus
	rro         bool
}

// apiTime converts a CRI timestamp (ns) to API time, at the API's precision of one second, so statuses read
// back from the API compare equal to computed ones.
func apiTime(ns int64) metav1.Time {
	if ns <= 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(ns/int64(time.Second), 0))
}

// RestartCountOf reads the restart count the kubelet recorded on a CRI container.
func RestartCountOf(annotations map[string]string) int32 {
	n, err := strconv.ParseInt(annotations[AnnotationRestartCount], 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// containerStatuses builds the statuses of the given containers (init or app) in spec order.
func containerStatuses(in containerInput, specs []v1.Container, old []v1.ContainerStatus, isInit bool) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	defaultReason := ReasonContainerCreating
	if len(in.pod.Spec.InitContainers) > 0 {
		defaultReason = ReasonPodInitializing
	}
	out := make([]v1.ContainerStatus, 0, len(specs))
	for i := range specs {
		spec := &specs[i]
		var oldStatus *v1.ContainerStatus
		if s, ok := findStatus(old, spec.Name); ok {
			oldStatus = &s
		}
		st := v1.ContainerStatus{
			Name:    spec.Name,
			Image:   spec.Image,
			State:   v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: defaultReason}},
			Started: ptrBool(false),
		}
		if oldStatus != nil {
			st.RestartCount = oldStatus.RestartCount
			st.LastTerminationState = oldStatus.LastTerminationState
		}

		seen := 0
		for _, c := range in.containers {
			if c.GetMetadata().GetName() != spec.Name {
				continue
			}
			if seen == 0 {
				st = convert(in, spec, c, oldStatus)
			} else {
				prev := convert(in, spec, c, nil)
				st.LastTerminationState = prev.State
			}
			seen++
			if seen == 2 {
				break
			}
		}
		if seen == 1 && oldStatus != nil && st.LastTerminationState.Terminated == nil {
			// Only one instance is left; keep the last termination we knew of.
			switch {
			case oldStatus.ContainerID == st.ContainerID:
				st.LastTerminationState = oldStatus.LastTerminationState
			case oldStatus.State.Terminated != nil:
				st.LastTerminationState = oldStatus.State
			}
		}

		st.VolumeMounts = volumeMounts(spec, oldStatus, in.rro)
		applyWaiting(in, spec, &st, isInit)
		if in.health != nil && len(spec.Resources.Claims) > 0 {
			st.AllocatedResourcesStatus = in.health(in.pod, spec.Name)
		}
		if isInit && !podfacts.IsSidecar(spec) && st.State.Terminated != nil && st.State.Terminated.ExitCode == 0 {
			st.Ready = true // as upstream: an init container that completed is ready
		}
		out = append(out, st)
	}
	return out
}

// volumeMounts is a container's status.volumeMounts, as upstream's kubelet reports them: each of its volume
// mounts' name, path and read-only flag, with the recursive read-only mode a read-only mount got (Enabled
// or Disabled, resolved against the runtime's support). They are immutable: once reported, kept.
func volumeMounts(spec *v1.Container, old *v1.ContainerStatus, runtimeRRO bool) []v1.VolumeMountStatus {
	if old != nil && len(old.VolumeMounts) > 0 {
		return old.VolumeMounts
	}
	var out []v1.VolumeMountStatus
	for i := range spec.VolumeMounts {
		m := &spec.VolumeMounts[i]
		vs := v1.VolumeMountStatus{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly}
		if m.ReadOnly {
			mode := v1.RecursiveReadOnlyDisabled
			if rro, err := podspec.RecursiveReadOnly(m, runtimeRRO); err == nil && rro {
				mode = v1.RecursiveReadOnlyEnabled
			}
			vs.RecursiveReadOnly = &mode
		}
		out = append(out, vs)
	}
	return out
}

// ephemeralStatuses builds the statuses of the pod's ephemeral containers as of its app containers, except
// that an ephemeral container is never Ready (it has no probes and serves nothing), as upstream reports it.
func ephemeralStatuses(in containerInput, pod *v1.Pod, old []v1.ContainerStatus) []v1.ContainerStatus {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return nil
	}
	specs := make([]v1.Container, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		specs[i] = v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	out := containerStatuses(in, specs, old, false)
	for i := range out {
		out[i].Ready = false
	}
	return out
}

// applyWaiting replaces the state of a container that is not running with the reason the last sync gave.
func applyWaiting(in containerInput, spec *v1.Container, st *v1.ContainerStatus, isInit bool) {
	w, ok := in.waiting[spec.Name]
	if !ok || w.Reason == "" || st.State.Running != nil {
		return
	}
	if isInit && !podfacts.IsSidecar(spec) && st.State.Terminated != nil && st.State.Terminated.ExitCode == 0 {
		return // a finished init container is never run again
	}
	if st.State.Terminated != nil {
		st.LastTerminationState = st.State
	}
	st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
}

func convert(in containerInput, spec *v1.Container, c *runtimeapi.ContainerStatus, old *v1.ContainerStatus) v1.ContainerStatus {
	id := in.runtimeName + "://" + c.Id
	st := v1.ContainerStatus{
		Name:         spec.Name,
		Image:        spec.Image,
		ImageID:      c.ImageRef,
		ContainerID:  id,
		RestartCount: RestartCountOf(c.Annotations),
		Started:      ptrBool(false),
		User:         containerUser(c.GetUser()),
	}
	switch c.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: apiTime(c.StartedAt)}
		st.Started = ptrBool(true)
		st.Ready = true
		if in.probe != nil {
			started, ready := in.probe(spec, c.Id)
			st.Started, st.Ready = ptrBool(started), started && ready
		}
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		st.State.Waiting = &v1.ContainerStateWaiting{}
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		reason := c.Reason
		if reason == "" {
			reason = "Error"
			if c.ExitCode == 0 {
				reason = "Completed"
			}
		}
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode:    c.ExitCode,
			Reason:      reason,
			Message:     c.Message,
			StartedAt:   apiTime(c.StartedAt),
			FinishedAt:  apiTime(c.FinishedAt),
			ContainerID: id,
		}
	default:
		if old != nil && old.State.Running != nil {
			// It ran and the runtime lost it: report it ended, never as "not yet run".
			st.State.Terminated = &v1.ContainerStateTerminated{
				Reason:   "ContainerStatusUnknown",
				Message:  "The container could not be located when the pod was terminated",
				ExitCode: 137,
			}
			st.RestartCount = old.RestartCount + 1
		} else {
			st.State.Waiting = &v1.ContainerStateWaiting{}
		}
	}
	return st
}

func ptrBool(b bool) *bool { return &b }

// containerUser is the identity the runtime reports a container's process started with, as upstream's
// kubelet puts it in the container's status (user.linux: uid, gid, supplementalGroups); nil when the runtime
// reports none.
func containerUser(u *runtimeapi.ContainerUser) *v1.ContainerUser {
	if u == nil {
		return nil
	}
	out := &v1.ContainerUser{}
	if l := u.GetLinux(); l != nil {
		out.Linux = &v1.LinuxContainerUser{UID: l.GetUid(), GID: l.GetGid(), SupplementalGroups: l.GetSupplementalGroups()}
	}
	return out
}
