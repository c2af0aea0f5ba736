package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/containerd/containerd"
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
	meta, err := r.metas.container(rec)
	if err != nil {
		return err
	}
	if rec.Labels[labelStartedAt] != "" || rec.Labels[labelFinishedAt] != "" {
		return fmt.Errorf("start container %q: already started", id)
	}
	cont, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("start container %q: %w", id, err)
	}
	fail := func(step string, err error) error {
		err = fmt.Errorf("start container %q (%s): %s: %w", meta.Metadata.GetName(), id, step, err)
		cctx, cancel := r.cleanupContext(ctx)
		defer cancel()
		r.recordStartError(cctx, cont, err)
		return err
	}
	log, err := openLogFile(meta.LogPath, r.clock)
	if err != nil {
		return fail("open log", err)
	}
	cio_ := newContainerIO(log, meta)
	task, err := cont.NewTask(ctx, cio_.creator(r.fifoDir(id)))
	if err != nil {
		cio_.finish()
		return fail("create task", err)
	}
	r.io.put(id, cio_)
	// Taken before Start: a process that exits at once must not look as if it ended before it began. It is
	// recorded while the task starts; a failed start overwrites it with the error's time.
	startedAt := r.clock.Now()
	recordStart := inBackground(func() error {
		_, err := cont.SetLabels(ctx, map[string]string{labelStartedAt: unixNanoLabel(startedAt)})
		return err
	})
	if err := task.Start(ctx); err != nil {
		_ = recordStart()
		cctx, cancel := r.cleanupContext(ctx)
		defer cancel()
		_, _ = task.Delete(cctx, containerd.WithProcessKill)
		if c := r.io.take(id); c != nil {
			c.finish()
		}
		return fail("start task", err)
	}
	if err := recordStart(); err != nil {
		return fmt.Errorf("start container %q: record start: %w", id, err)
	}
	r.events.publishContainer(id, meta.SandboxID, rec.Labels[labelPodUID], eventStarted)
	return nil
}

func (r *Runtime) fifoDir(id string) string { return filepath.Join(r.cfg.FIFODir, id) }

// recordStartError marks a container that could not start as exited, with the error as its message.
func (r *Runtime) recordStartError(ctx context.Context, cont containerd.Container, cause error) {
	now := unixNanoLabel(r.clock.Now())
	msg := cause.Error()
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	_, err := cont.SetLabels(ctx, map[string]string{
		labelStartedAt:  now,
		labelFinishedAt: now,
		labelExitCode:   strconv.Itoa(startErrorExitCode),
		labelReason:     reasonStartError,
		labelMessage:    msg,
	})
	if err != nil {
		logger(ctx).Error(err, "Recording start error failed", "container", cont.ID())
	}
}
