package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/failpoint"
)

// containerView is what one container looks like to CRI, derived from its record and task.
type containerView struct {
	rec        containers.Container
	meta       *containerMeta
	state      runtimeapi.ContainerState
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string
	pid        uint32
}

// viewContainer derives a container's state: recorded exit first, then the live task, then what is left
// (started but neither running nor recorded means its task vanished, e.g. with a host reboot). With
// fromLabels the labels alone decide: a started container whose exit is not recorded is running. That is what
// lists use: exits are recorded from containerd's events within milliseconds, and a periodic reconciliation
// against the tasks catches any missed, so a list needs no call to every shim.
func viewContainer(rec containers.Container, meta *containerMeta, t *task.Process, fromLabels bool) *containerView {
	v := &containerView{
		rec:        rec,
		meta:       meta,
		startedAt:  labelInt64(rec.Labels, labelStartedAt),
		finishedAt: labelInt64(rec.Labels, labelFinishedAt),
		reason:     rec.Labels[labelReason],
		message:    rec.Labels[labelMessage],
	}
	switch {
	case v.finishedAt != 0:
		v.state = runtimeapi.ContainerState_CONTAINER_EXITED
		code, _ := strconv.ParseInt(rec.Labels[labelExitCode], 10, 32)
		v.exitCode = int32(code)
	case fromLabels && v.startedAt != 0:
		v.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	case fromLabels:
		v.state = runtimeapi.ContainerState_CONTAINER_CREATED
	case t != nil && (t.Status == task.Status_RUNNING || t.Status == task.Status_PAUSED || t.Status == task.Status_PAUSING):
		v.state = runtimeapi.ContainerState_CONTAINER_RUNNING
		v.pid = t.Pid
	case t != nil && t.Status == task.Status_STOPPED:
		// The exit is being recorded; report it already.
		v.state = runtimeapi.ContainerState_CONTAINER_EXITED
		v.exitCode = int32(t.ExitStatus)
		v.reason = exitReason(t.ExitStatus, false)
		if t.ExitedAt != nil {
			v.finishedAt = t.ExitedAt.AsTime().UnixNano()
		}
	case t != nil: // created but not yet started
		v.state = runtimeapi.ContainerState_CONTAINER_CREATED
	case v.startedAt != 0:
		v.state = runtimeapi.ContainerState_CONTAINER_EXITED
		v.exitCode = 255
		v.reason = reasonUnknown
		v.message = "container process is gone and its exit was not recorded"
	default:
		v.state = runtimeapi.ContainerState_CONTAINER_CREATED
	}
	return v
}

// ContainerStatus returns a container's state, exit details, image and mounts.
func (r *Runtime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	ctx = r.ns(ctx)
	rec, err := r.findContainer(ctx, containerID, kindContainer)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", containerID, err)
	}
	rec = r.withLabelsInFlight(rec)
	var t *task.Process
	// A recorded (or announced) exit is final, and what the view reports: the task, which may be being
	// deleted right then (a runc delete in the shim, which containerd's answer would wait for), adds nothing.
	if rec.Labels[labelFinishedAt] == "" {
		if t, err = r.taskOf(ctx, rec.ID); err != nil {
			return nil, fmt.Errorf("container %q: task: %w", containerID, err)
		}
	}
	if recordMayBeBehind(rec.Labels, t) {
		// The exit may have been recorded and the task deleted between the two reads (a container that exits
		// at once): the record, read again, has it. Without this a quick exit was reported as a lost one (255).
		if rec, err = r.recordOf(ctx, rec.ID); err != nil {
			return nil, fmt.Errorf("container %q: %w", containerID, err)
		}
	}
	meta, err := r.records.metas.container(rec)
	if err != nil {
		return nil, err
	}
	if meta.Metadata != nil {
		failpoint.HangIf(failpoint.HangContainerStatus, meta.Metadata.Name)
	}
	if t != nil && t.Status == task.Status_STOPPED && rec.Labels[labelFinishedAt] == "" {
		// The exit is not recorded yet (its event is on its way): record it now, so that lists, which go by
		// the recorded state, agree with this answer from here on.
		if err := r.persistExit(ctx, rec.ID, t.ExitStatus, exitTime(t.ExitedAt)); err != nil {
			return nil, err
		}
		// Answer from the record, which knows an OOM kill.
		if rec, err = r.recordOf(ctx, rec.ID); err != nil {
			return nil, fmt.Errorf("container %q: %w", containerID, err)
		}
		t = nil
	}
	v := viewContainer(rec, meta, t, false)
	st := &runtimeapi.ContainerStatus{
		Id:          rec.ID,
		Metadata:    v.meta.Metadata,
		State:       v.state,
		CreatedAt:   v.meta.CreatedAt,
		StartedAt:   v.startedAt,
		FinishedAt:  v.finishedAt,
		ExitCode:    v.exitCode,
		Image:       &runtimeapi.ImageSpec{Image: v.meta.Image},
		ImageRef:    v.meta.ImageRef,
		ImageId:     v.meta.ImageRef,
		Reason:      v.reason,
		Message:     v.message,
		Labels:      v.meta.Labels,
		Annotations: v.meta.Annotations,
		Mounts:      v.meta.Mounts,
		LogPath:     v.meta.LogPath,
		User:        containerUser(rec, v.meta),
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: st}
	if verbose {
		resp.Info = map[string]string{"pid": strconv.FormatUint(uint64(v.pid), 10), "sandboxID": v.meta.SandboxID}
	}
	return resp, nil
}

// ListContainers lists containers matching the filter, with one containerd call for the records and one for
// the tasks, whatever the number of containers.
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx = r.ns(ctx)
	views, err := r.listContainerViews(ctx, filter.GetPodSandboxId(), filter.GetLabelSelector())
	if err != nil {
		return nil, err
	}
	var out []*runtimeapi.Container
	for _, v := range views {
		c := &runtimeapi.Container{
			Id:           v.rec.ID,
			PodSandboxId: v.meta.SandboxID,
			Metadata:     v.meta.Metadata,
			Image:        &runtimeapi.ImageSpec{Image: v.meta.Image},
			ImageRef:     v.meta.ImageRef,
			ImageId:      v.meta.ImageRef,
			State:        v.state,
			CreatedAt:    v.meta.CreatedAt,
			Labels:       v.meta.Labels,
			Annotations:  v.meta.Annotations,
		}
		if filter != nil {
			if filter.Id != "" && !strings.HasPrefix(c.Id, filter.Id) {
				continue
			}
			if filter.State != nil && filter.State.State != c.State {
				continue
			}
			if !matchLabels(filter.LabelSelector, c.Labels) {
				continue
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func (r *Runtime) listContainerViews(ctx context.Context, sandboxPrefix string, selector map[string]string) ([]*containerView, error) {
	recs, err := r.listRecords(ctx, listMatch(kindContainer, selector))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []*containerView
	for _, rec := range recs {
		if sandboxPrefix != "" && !strings.HasPrefix(rec.Labels[labelSandboxID], sandboxPrefix) {
			continue
		}
		meta, err := r.records.metas.container(rec)
		if err != nil {
			logger(ctx).Error(err, "Skipping container with unreadable metadata", "id", rec.ID)
			continue
		}
		out = append(out, viewContainer(r.withLabelsInFlight(rec), meta, nil, true))
	}
	return out, nil
}

// sandboxContainers lists the records of one sandbox's containers.
func (r *Runtime) sandboxContainers(ctx context.Context, sandboxID string) ([]containers.Container, error) {
	recs, err := r.listRecords(ctx, labelIs(labelSandboxID, sandboxID))
	if err != nil {
		return nil, fmt.Errorf("list containers of sandbox %s: %w", sandboxID, err)
	}
	return recs, nil
}

// recordMayBeBehind says whether a container record read before its task may miss the exit that ended the
// task: the record shows it started and not finished, and the task is gone. The exit is recorded before a
// task is deleted, so a record read after the task's absence was seen is current.
func recordMayBeBehind(labels map[string]string, t *task.Process) bool {
	return t == nil && exitUnrecorded(labels)
}
