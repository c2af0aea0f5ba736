package runtime

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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

// recordExit records a container's exit in its labels (so it survives restarts of this process and of
// containerd) and announces it, unless it is recorded already. It holds the container's exit lock.
func (r *Runtime) recordExit(ctx context.Context, id string, exitCode uint32, exitedAt time.Time) error {
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
		reason := exitReason(exitCode, r.oomKilled(id, labels))
		if exitedAt.IsZero() {
			exitedAt = r.clock.Now()
		}
		err := r.setLabels(ctx, id, map[string]string{
			labelFinishedAt: unixNanoLabel(exitedAt),
			labelExitCode:   strconv.FormatUint(uint64(exitCode), 10),
			labelReason:     reason,
		})
		if err != nil {
			return fmt.Errorf("record exit of %s: %w", id, err)
		}
		r.oomSeen.Delete(id)
		logger(ctx).V(2).Info("Container exited", "id", id, "exitCode", exitCode, "reason", reason)
		// Announced now: the task's deletion and the log's last lines do not change what a watcher sees.
		r.events.publishContainer(id, labels[labelSandboxID], labels[labelPodUID], eventStopped)
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
func (r *Runtime) oomKilled(id string, _ map[string]string) bool {
	if _, ok := r.oomSeen.Load(id); ok {
		return true
	}
	path := r.containerCgroupPath(id)
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

// containerCgroupPath is the cgroupfs path of a container: what CreateContainer set, or containerd's default.
func (r *Runtime) containerCgroupPath(id string) string {
	rec, err := r.client.ContainerService().Get(r.ns(context.Background()), id)
	if err == nil {
		if meta, err := decodeContainerMeta(rec); err == nil && meta.CgroupsPath != "" {
			return cgroupfsPath(meta.CgroupsPath)
		}
	}
	return filepath.Join("/", r.cfg.Namespace, id)
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
