package runtime

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Reasons a terminated container reports, as Kubernetes names them.
const (
	reasonCompleted = "Completed"
	reasonError     = "Error"
	reasonOOMKilled = "OOMKilled"
	reasonUnknown   = "Unknown"
)

// persistExit records a container's exit (recordExit), deletes its task, and closes its log. Calling it again
// for the same exit is harmless.
func (r *Runtime) persistExit(ctx context.Context, id string, exitCode uint32, exitedAt time.Time) error {
	if err := r.recordExit(ctx, id, exitCode, exitedAt); err != nil {
		return err
	}
	return r.finishExit(ctx, id)
}

// recordExit announces a container's exit and records it in its labels (so that it survives restarts of this
// process and of containerd), unless it is recorded already. It holds the container's exit lock. The task's
// deletion and the log's last lines that follow do not change what a watcher sees.
func (r *Runtime) recordExit(ctx context.Context, id string, exitCode uint32, exitedAt time.Time) error {
	return r.recordExitAnnouncing(ctx, id, exitCode, exitedAt, nil)
}

// recordExitAnnouncing is recordExit calling announced (when not nil) once the exit is announced, before its
// write.
func (r *Runtime) recordExitAnnouncing(ctx context.Context, id string, exitCode uint32, exitedAt time.Time, announced func()) error {
	unlock := r.exitLocks.lock(id)
	defer unlock()
	rec, err := r.recordOf(ctx, id) // current: this process's writes reach the index before they return
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record exit of %s: %w", id, err)
	}
	labels := rec.Labels
	if labels[labelFinishedAt] == "" {
		reason := exitReason(exitCode, r.oomKilled(rec))
		if exitedAt.IsZero() {
			exitedAt = r.clock.Now()
		}
		exit := map[string]string{
			labelFinishedAt: unixNanoLabel(exitedAt),
			labelExitCode:   strconv.FormatUint(uint64(exitCode), 10),
			labelReason:     reason,
		}
		// Announced before containerd's write of the record (a few milliseconds, tens on a busy host): until
		// it returns, views of the container read the exit from labelsInFlight. Should this process die
		// meanwhile, the task, deleted only after the write, still holds the exit for the next start.
		r.labelsInFlight.Store(id, exit)
		r.events.publishContainer(id, labels[labelSandboxID], labels[labelPodUID], eventStopped)
		if l := logger(ctx).V(2); l.Enabled() {
			pod := labels[labelPodUID]
			if meta, err := r.records.metas.container(rec); err == nil {
				pod = r.podOf(ctx, meta)
			}
			l.Info("Container exited", "pod", pod, "id", id, "exitCode", exitCode, "reason", reason)
		}
		if announced != nil {
			announced()
		}
		err := r.setLabels(ctx, id, exit)
		r.labelsInFlight.Delete(id)
		if errdefs.IsNotFound(err) {
			return nil // removed meanwhile: nothing left to record
		}
		if err != nil {
			return fmt.Errorf("record exit of %s: %w", id, err)
		}
		r.oomSeen.Delete(id)
	}
	return nil
}

// finishExit deletes an exited container's task, then waits (a bounded time) for the last of its output:
// the shim closes the log's pipes when the task is deleted. Both the event watch and a StopContainer may get
// here; the later one finds the task gone and the log taken.
func (r *Runtime) finishExit(ctx context.Context, id string) error {
	if err := r.removeTask(ctx, id); err != nil {
		return fmt.Errorf("delete task of %s: %w", id, err)
	}
	r.finishOutput(ctx, id)
	return nil
}

// backgroundDeletes is how many finishExitLater deletions run at once. Each costs CPU (a runc process, and
// the shim's exit after its last task); when many pods stop at once (a node drained, a workload deleted),
// running them all at once takes that CPU from the kills, network teardowns and records that callers wait
// for: 30 pods deleted together are gone from the API about 0.2 s sooner on two cores.
const backgroundDeletes = 2

// finishExitLater runs finishExit off the caller's path, backgroundDeletes at a time. Deleting a task takes
// hundreds of milliseconds when many pods stop at once, and nothing a caller sees depends on it once the
// exit is recorded: removing the container or sandbox deletes the task at once if it is still there. Close
// waits for these.
func (r *Runtime) finishExitLater(ctx context.Context, id string) {
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		r.deletes <- struct{}{}
		defer func() { <-r.deletes }()
		cctx, cancel := r.cleanupContext(ctx)
		defer cancel()
		if err := r.finishExit(cctx, id); err != nil {
			// The task is deleted again when the container is removed, or by the reconcile loop.
			logger(ctx).V(2).Info("Deleting an exited task failed", "id", id, "err", err)
		}
	}()
}

// recordPauseExit marks a sandbox whose pause process is gone, so that listing sandboxes needs no task
// query, and tells watchers.
func (r *Runtime) recordPauseExit(ctx context.Context, id string, labels map[string]string) {
	if labels[labelExited] == "true" {
		return
	}
	if err := r.setLabels(ctx, id, map[string]string{labelExited: "true"}); err != nil {
		if !errdefs.IsNotFound(err) { // a sandbox removed meanwhile has no exit to record
			logger(ctx).Error(err, "Recording sandbox exit failed", "sandbox", id)
		}
		return
	}
	r.events.publishContainer(id, id, labels[labelPodUID], eventStopped)
}

// withLabelsInFlight returns rec with the labels announced and not yet written to it, if any (a copy: the
// index's label maps are shared). What the record holds already stays: an exit recorded is the exit.
func (r *Runtime) withLabelsInFlight(rec containers.Container) containers.Container {
	v, ok := r.labelsInFlight.Load(rec.ID)
	if !ok || rec.Labels[labelFinishedAt] != "" {
		return rec
	}
	labels := maps.Clone(rec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, val := range v.(map[string]string) {
		if _, has := labels[k]; !has {
			labels[k] = val
		}
	}
	rec.Labels = labels
	return rec
}

// exitTime is containerd's exit timestamp as a time; zero when it has none (recordExit then takes now).
func exitTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func exitReason(code uint32, oom bool) string {
	switch {
	case oom:
		return reasonOOMKilled
	case code == 0:
		return reasonCompleted
	default:
		return reasonError
	}
}

// oomKilled reports whether the kernel OOM-killed in the container's cgroup: from containerd's OOM event when
// this process saw it, else from the cgroup's own oom_kill counter, read before the task is deleted.
func (r *Runtime) oomKilled(rec containers.Container) bool {
	if _, ok := r.oomSeen.Load(rec.ID); ok {
		return true
	}
	path := r.containerCgroupPath(rec)
	for _, f := range []string{
		filepath.Join("/sys/fs/cgroup/memory", path, "memory.oom_control"), // v1
		filepath.Join("/sys/fs/cgroup", path, "memory.events"),             // v2
	} {
		if n, ok := readKeyedCounter(f, "oom_kill"); ok {
			return n > 0
		}
	}
	return false
}

// containerCgroupPath is the cgroupfs path of a container: what CreateContainer set (from the metadata kept
// for its record: no call to containerd on an exit's path), or containerd's default.
func (r *Runtime) containerCgroupPath(rec containers.Container) string {
	if meta, err := r.records.metas.container(rec); err == nil && meta.CgroupsPath != "" {
		return cgroupfsPath(meta.CgroupsPath)
	}
	return filepath.Join("/", r.cfg.Namespace, rec.ID)
}

// readKeyedCounter reads "key value" lines (memory.oom_control, memory.events) and returns key's value.
func readKeyedCounter(path, key string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 2 && fields[0] == key {
			n, err := strconv.ParseUint(fields[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
