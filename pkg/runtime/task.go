package runtime

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"golang.org/x/sys/unix"
)

// Tasks are signalled, waited for and deleted by container ID through containerd's task service. The
// client's containerd.Container and containerd.Task objects would read the container record and the task's
// state again before each of these calls: five or six calls to stop a pod's pause task where three do.

// The calls below that go through containerd to the pod's shim answer NotFound for a task that is gone. A task
// deleted while a call is under way (its exit recorded meanwhile by the event watch) can instead fail with
// "ttrpc: closed": deleting a task closes containerd's connection to the shim for it. goneAsNotFound tells the
// two apart, so that callers need only look for NotFound.

// goneAsNotFound returns err as NotFound when the task id no longer exists, else unchanged.
func (r *Runtime) goneAsNotFound(ctx context.Context, id string, err error) error {
	if err == nil || errdefs.IsNotFound(err) {
		return err
	}
	if _, gerr := r.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: id}); errdefs.IsNotFound(errgrpc.ToNative(gerr)) {
		return fmt.Errorf("%v: task is gone: %w", err, errdefs.ErrNotFound)
	}
	return err
}

// taskExit is how a task ended, or why waiting for it failed (err; NotFound once the task is deleted).
type taskExit struct {
	code uint32
	at   time.Time
	err  error
}

// waitTask waits for a container's task to exit; the channel receives one taskExit. A task that has already
// exited (and is not yet deleted) answers at once.
func (r *Runtime) waitTask(ctx context.Context, id string) <-chan taskExit {
	ch := make(chan taskExit, 1)
	go func() {
		resp, err := r.client.TaskService().Wait(ctx, &tasks.WaitRequest{ContainerID: id})
		if err != nil {
			ch <- taskExit{err: r.goneAsNotFound(ctx, id, errgrpc.ToNative(err))}
			return
		}
		ch <- taskExit{code: resp.ExitStatus, at: exitTime(resp.ExitedAt)}
	}()
	return ch
}

// taskOf returns the task of a sandbox or container, nil when it has none. A task whose main process this
// runtime holds a pidfd on (procTable) and which still exists is running: that answer needs no round trip
// through containerd to the pod's shim.
func (r *Runtime) taskOf(ctx context.Context, id string) (*task.Process, error) {
	if pid, ok := r.procs.alivePID(id); ok {
		return &task.Process{ID: id, ContainerID: id, Pid: uint32(pid), Status: task.Status_RUNNING}, nil
	}
	resp, err := r.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: id})
	if err != nil {
		if err := errgrpc.ToNative(err); !errdefs.IsNotFound(err) {
			return nil, err
		}
		return nil, nil
	}
	return resp.GetProcess(), nil
}

// killTask sends sig to a container's task, to all its processes when all is set. A task that does not exist
// or has exited answers NotFound.
func (r *Runtime) killTask(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	_, err := r.client.TaskService().Kill(ctx, &tasks.KillRequest{ContainerID: id, Signal: uint32(sig), All: all})
	return r.goneAsNotFound(ctx, id, errgrpc.ToNative(err))
}

// removeTask deletes a container's exited task. A task already gone is not an error.
func (r *Runtime) removeTask(ctx context.Context, id string) error {
	_, err := r.client.TaskService().Delete(ctx, &tasks.DeleteTaskRequest{ContainerID: id})
	if err := r.goneAsNotFound(ctx, id, errgrpc.ToNative(err)); err != nil && !errdefs.IsNotFound(err) {
		return err
	}
	r.procs.forget(id)
	return nil
}

// deleteTask kills a container's task if it still runs, waits up to 10 s for it to exit, and deletes it. A
// container without a task is not an error.
func (r *Runtime) deleteTask(ctx context.Context, id string) error {
	if err := r.stopTask(ctx, id); err != nil {
		return err
	}
	if err := r.removeTask(ctx, id); err != nil {
		return fmt.Errorf("delete task: %w", err)
	}
	return nil
}

// stopTask kills a container's task if it still runs and waits up to 10 s for it to exit. A container
// without a task is not an error; a process still there after 10 s is.
func (r *Runtime) stopTask(ctx context.Context, id string) error {
	switch err := r.signalTask(ctx, id, unix.SIGKILL); {
	case err == nil:
		select {
		case <-r.waitTask(ctx, id):
		case <-time.After(10 * time.Second):
			return fmt.Errorf("kill: %s did not exit within 10 s", id)
		case <-ctx.Done():
			return ctx.Err()
		}
	case !errdefs.IsNotFound(err):
		return fmt.Errorf("kill: %w", err)
	}
	return nil
}

// deleteRecord removes a container's snapshot and its containerd record, from the record in hand, as
// containerd.Container.Delete with WithSnapshotCleanup does after reading the task and the record again. The
// task must be gone (deleteTask). Its image volumes are unmounted and removed first. What is already gone is
// not an error.
func (r *Runtime) deleteRecord(ctx context.Context, rec containers.Container) error {
	if err := r.unmountImageVolumes(ctx, rec.ID); err != nil {
		return err
	}
	if rec.SnapshotKey != "" && rec.Snapshotter != "" {
		if err := r.client.SnapshotService(rec.Snapshotter).Remove(ctx, rec.SnapshotKey); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove snapshot: %w", err)
		}
	}
	if err := r.client.ContainerService().Delete(ctx, rec.ID); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container record: %w", err)
	}
	return nil
}
