package runtime

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
)

// A signal to a running container's main process goes from this process straight to the kernel, through a
// pidfd, rather than through containerd: there, the shim starts `runc kill` for every signal, a process start
// that costs about 5 ms of CPU and, when 30 pods stop at once on two cores, 100-200 ms of waiting. A stop
// signal that waits that long also starts its grace period late. The shim still reaps the process and reports
// its exit, as it does for a process that ends by itself.
//
// The process is signalled only when it is proven to be the container's: this runtime started the task with
// that PID (or containerd reports it running with it), and once a pidfd holds the process, its cgroup is the
// container's (every container's cgroup path ends in its ID). A pidfd refers to the process it was opened for,
// so a PID reused after the check is never signalled. The pidfds are kept (procTable), so no signal asks
// containerd anything once the runtime holds the process. Anything else (a task created but not started,
// paused or stopped; a kernel without pidfds; a containerd in another PID namespace) goes through containerd.

// signalTask sends sig to a container's main process. A container whose task does not exist, or whose
// process has exited, answers NotFound.
func (r *Runtime) signalTask(ctx context.Context, id string, sig syscall.Signal) error {
	if known, err := r.procs.signal(id, sig); known {
		return err
	}
	// A process the table does not hold (started before this runtime was): from containerd, if it runs.
	t, err := r.taskOf(ctx, id)
	if err == nil && t == nil {
		return fmt.Errorf("signal container %s: no task: %w", id, errdefs.ErrNotFound)
	}
	if err == nil && t.GetStatus() == task.Status_RUNNING {
		r.procs.remember(id, int(t.GetPid()))
		if known, err := r.procs.signal(id, sig); known {
			return err
		}
	}
	return r.killTask(ctx, id, sig, false)
}

// inContainerCgroup reports whether the process pid is in a cgroup of the container id.
func inContainerCgroup(pid int, id string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && cgroupFileNames(string(b), id)
}

// cgroupFileNames reports whether a /proc/<pid>/cgroup file puts the process in a cgroup of the container id:
// one whose last path element is the ID (cgroupfs) or a systemd scope named after it. Container IDs are 64
// random hex digits, so no other process's cgroup is named so.
func cgroupFileNames(content, id string) bool {
	if id == "" {
		return false
	}
	for _, line := range strings.Split(content, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		last := parts[2][strings.LastIndexByte(parts[2], '/')+1:]
		if last == id || strings.HasSuffix(last, "-"+id+".scope") {
			return true
		}
	}
	return false
}
