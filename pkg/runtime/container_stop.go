package runtime

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/sys/signal"
	"golang.org/x/sys/unix"
)

// StopContainer sends the container's stop signal (the image's, else SIGTERM), waits up to timeout seconds,
// then kills it. Stopping a stopped container is not an error.
func (r *Runtime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	ctx = r.ns(ctx)
	rec, err := r.findContainer(ctx, containerID, kindContainer)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop container %q: %w", containerID, err)
	}
	meta, err := r.records.metas.container(rec)
	if err != nil {
		return err
	}
	exited := r.waitTask(ctx, rec.ID)
	if timeout > 0 {
		sig := unix.SIGTERM
		if meta.StopSignal != "" {
			if s, err := signal.ParseSignal(meta.StopSignal); err == nil {
				sig = s
			}
		}
		// NotFound: the process has exited, or never started; the wait answers at once.
		if err := r.signalTask(ctx, rec.ID, sig); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("stop container %q: signal %v: %w", containerID, sig, err)
		}
		timer := time.NewTimer(time.Duration(timeout) * time.Second)
		defer timer.Stop()
		select {
		case st := <-exited:
			return r.recordStop(ctx, rec.ID, st)
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The main process only, as containerd's CRI plugin does: the shim kills whatever else runs in the
	// container's cgroup when the main process of a container without a PID namespace of its own ends.
	if err := r.signalTask(ctx, rec.ID, unix.SIGKILL); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("stop container %q: kill: %w", containerID, err)
	}
	select {
	case st := <-exited:
		return r.recordStop(ctx, rec.ID, st)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recordStop records the exit a StopContainer waited for, and returns once the exit is announced: its write
// to containerd's record, the task's deletion and the log's last lines follow off the caller's path (the
// event watch, recording the same exit, usually gets there first). When many pods stop at once, containerd
// writes their records one after another (each synced to disk), and a stop that waited for its own write
// returned hundreds of milliseconds after the exit. Views read an announced exit meanwhile, and the task,
// deleted only after the write, holds the exit for a process that dies before it. A wait that found the task
// deleted means the exit was recorded meanwhile (by the event watch).
func (r *Runtime) recordStop(ctx context.Context, id string, st taskExit) error {
	if errdefs.IsNotFound(st.err) {
		return nil
	}
	if st.err != nil {
		return fmt.Errorf("stop container %q: wait: %w", id, st.err)
	}
	if _, inFlight := r.labelsInFlight.Load(id); inFlight {
		return nil // announced by the event watch, which writes it
	}
	announced, done := make(chan struct{}), make(chan error, 1)
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		wasAnnounced := false
		err := r.recordExitAnnouncing(context.WithoutCancel(ctx), id, st.code, st.at, func() {
			wasAnnounced = true
			close(announced)
		})
		if err == nil {
			r.finishExitLater(ctx, id)
		} else if wasAnnounced {
			// The exit goes back to its task, which the event watch's reconcile records again.
			logger(ctx).Error(err, "Recording a stopped container's exit failed", "id", id)
		}
		done <- err
	}()
	select {
	case <-announced:
		return nil
	case err := <-done:
		return err
	}
}

// RemoveContainer kills the container if it still runs and removes it with its snapshot. Removing a container
// that does not exist is not an error. The log file stays: it belongs to the caller.
func (r *Runtime) RemoveContainer(ctx context.Context, containerID string) error {
	ctx = r.ns(ctx)
	rec, err := r.findContainer(ctx, containerID, kindContainer)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove container %q: %w", containerID, err)
	}
	if err := r.deleteTask(ctx, rec.ID); err != nil {
		return fmt.Errorf("remove container %q: %w", containerID, err)
	}
	r.finishOutput(ctx, rec.ID)
	if err := r.deleteRecord(ctx, rec); err != nil {
		return fmt.Errorf("remove container %q: %w", containerID, err)
	}
	if err := os.RemoveAll(r.fifoDir(rec.ID)); err != nil {
		logger(ctx).Error(err, "Removing a removed container's FIFO directory failed", "id", rec.ID, "dir", r.fifoDir(rec.ID))
	}
	r.events.publishContainer(rec.ID, rec.Labels[labelSandboxID], rec.Labels[labelPodUID], eventDeleted)
	return nil
}
