package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs/pkg/errgrpc"
)

// exit code and reason recorded for a container whose start failed, as other CRI runtimes report it.
const (
	startErrorExitCode = 128
	reasonStartError   = "StartError"
)

// StartContainer starts a created container, copying its output to its CRI log file.
func (r *Runtime) StartContainer(ctx context.Context, containerID string) (retErr error) {
	ctx = r.ns(ctx)
	rec, err := r.findContainer(ctx, containerID, kindContainer)
	if err != nil {
		return fmt.Errorf("start container %q: %w", containerID, err)
	}
	id := rec.ID
	meta, err := r.records.metas.container(rec)
	if err != nil {
		return err
	}
	if rec.Labels[labelStartedAt] != "" || rec.Labels[labelFinishedAt] != "" {
		return fmt.Errorf("start container %q: already started", id)
	}
	fail := func(step string, err error) error {
		err = fmt.Errorf("start container %q (%s): %s: %w", meta.Metadata.GetName(), id, step, err)
		cctx, cancel := r.cleanupContext(ctx)
		defer cancel()
		r.recordStartError(cctx, id, err)
		return err
	}
	cio_ := r.newContainerIO(id, meta)
	if _, err := r.createTask(ctx, rec, r.creator(cio_, meta.Stdin, r.fifoDir(id))); err != nil {
		return fail("create task", err)
	}
	r.io.put(id, cio_)
	// Taken before Start: a process that exits at once must not look as if it ended before it began. It is
	// recorded while the task starts; a failed start overwrites it with the error's time.
	startedAt := r.clock.Now()
	recordStart := inBackground(func() error {
		return r.setLabels(ctx, id, map[string]string{labelStartedAt: unixNanoLabel(startedAt)})
	})
	started, err := r.client.TaskService().Start(ctx, &tasks.StartRequest{ContainerID: id})
	if err != nil {
		if rerr := recordStart(); rerr != nil {
			logger(ctx).V(2).Info("Recording the start of a container that did not start failed; the error's record follows", "id", id, "err", rerr)
		}
		cctx, cancel := r.cleanupContext(ctx)
		defer cancel()
		if derr := r.deleteTask(cctx, id); derr != nil {
			logger(ctx).Error(derr, "Undoing a failed container start failed; the container's removal will retry",
				"step", "delete the task", "id", id)
		}
		r.finishOutput(cctx, id)
		return fail("start task", errgrpc.ToNative(err))
	}
	r.procs.remember(id, int(started.GetPid()))
	if err := recordStart(); err != nil {
		return fmt.Errorf("start container %q: record start: %w", id, err)
	}
	r.events.publishContainer(id, meta.SandboxID, rec.Labels[labelPodUID], eventStarted)
	logger(ctx).V(2).Info("Started container", "pod", r.podOf(ctx, meta), "container", meta.Metadata.GetName(), "id", id)
	return nil
}

// createTask creates the container's task as containerd.Container.NewTask does, from the record already in
// hand: the client's NewTask reads the container record twice more (for its snapshot, then its spec) first.
// It returns the task's process ID.
func (r *Runtime) createTask(ctx context.Context, rec containers.Container, ioCreate cio.Creator) (_ uint32, retErr error) {
	io, err := ioCreate(rec.ID)
	if err != nil {
		return 0, err
	}
	defer func() {
		if retErr != nil {
			io.Cancel()
			_ = io.Close() // closes what the failed create opened; it logs its own failures
		}
	}()
	cfg := io.Config()
	req := &tasks.CreateTaskRequest{
		ContainerID: rec.ID,
		Terminal:    cfg.Terminal,
		Stdin:       cfg.Stdin,
		Stdout:      cfg.Stdout,
		Stderr:      cfg.Stderr,
	}
	if rec.SnapshotKey != "" { // a pause container on the shared view has none: its spec names its root
		mounts, err := r.client.SnapshotService(rec.Snapshotter).Mounts(ctx, rec.SnapshotKey)
		if err != nil {
			return 0, fmt.Errorf("rootfs mounts: %w", err)
		}
		for _, m := range mounts {
			req.Rootfs = append(req.Rootfs, &types.Mount{Type: m.Type, Source: m.Source, Target: m.Target, Options: m.Options})
		}
	}
	created, err := r.client.TaskService().Create(ctx, req)
	if err != nil {
		return 0, errgrpc.ToNative(err)
	}
	return created.GetPid(), nil
}

// setLabels sets labels on a record, as containerd.Container.SetLabels does, by ID.
func (r *Runtime) setLabels(ctx context.Context, id string, labels map[string]string) error {
	var paths []string
	for k := range labels {
		paths = append(paths, "labels."+k)
	}
	_, err := r.client.ContainerService().Update(ctx, containers.Container{ID: id, Labels: labels}, paths...)
	return err
}

func (r *Runtime) fifoDir(id string) string { return filepath.Join(r.cfg.FIFODir, id) }

// recordStartError marks a container that could not start as exited, with the error as its message.
func (r *Runtime) recordStartError(ctx context.Context, id string, cause error) {
	now := unixNanoLabel(r.clock.Now())
	msg := cause.Error()
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	err := r.setLabels(ctx, id, map[string]string{
		labelStartedAt:  now,
		labelFinishedAt: now,
		labelExitCode:   strconv.Itoa(startErrorExitCode),
		labelReason:     reasonStartError,
		labelMessage:    msg,
	})
	if err != nil {
		logger(ctx).Error(err, "Recording start error failed", "container", id)
	}
}

// podOf names a container's pod as namespace/name for the log: from the kubelet's labels, or else (a CRI
// client that sets none, such as crictl) from its sandbox's metadata.
func (r *Runtime) podOf(ctx context.Context, meta *containerMeta) string {
	if ns, name := meta.Labels[criLabelPodNamespace], meta.Labels[criLabelPodName]; name != "" {
		return ns + "/" + name
	}
	if rec, err := r.findContainer(ctx, meta.SandboxID, kindSandbox); err == nil {
		if sb, err := r.records.metas.sandbox(rec); err == nil {
			return sb.Metadata.GetNamespace() + "/" + sb.Metadata.GetName()
		}
	}
	return meta.SandboxID
}
