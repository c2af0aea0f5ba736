package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"

	"github.com/nodeagent/kubelet/pkg/cni"
)

// StopPodSandbox kills every container of the sandbox and the pause container, detaches the network and
// removes the network namespace. It is idempotent, and a sandbox that is already gone is not an error.
func (r *Runtime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	ctx = r.ns(ctx)
	unlock := r.sandboxLocks.lock(podSandboxID)
	defer unlock()
	rec, meta, err := r.loadSandbox(ctx, podSandboxID)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return r.stopSandbox(ctx, rec, meta)
}

func (r *Runtime) stopSandbox(ctx context.Context, rec containers.Container, meta *sandboxMeta) error {
	id := rec.ID
	if rec.Labels[labelStopped] == "true" {
		// A stop that finished (the label is its last step): the kubelet's RemovePodSandbox after its
		// StopPodSandbox need not run the CNI plugins again.
		return nil
	}
	ctrs, err := r.sandboxContainers(ctx, id)
	if err != nil {
		return err
	}
	for _, c := range ctrs {
		if c.Labels[labelFinishedAt] != "" {
			continue // its exit is recorded: nothing to stop
		}
		if err := r.StopContainer(ctx, c.ID, 0); err != nil {
			return fmt.Errorf("stop pod sandbox %s: %w", id, err)
		}
	}
	// The network is detached while the pause container goes: the one waits on containerd and the shim, the
	// other on the plugins and the kernel, and neither needs the other (the pause process uses no network).
	network := inBackground(func() error {
		if meta.HostNetwork {
			return nil
		}
		if err := r.cfg.Network.Teardown(ctx, id, meta.NetnsPath, cniPod(meta)); err != nil {
			return fmt.Errorf("teardown network: %w", err)
		}
		return cni.DeleteNetns(meta.NetnsName)
	})
	var taskErr error
	if err := r.stopTask(ctx, id); err != nil {
		taskErr = fmt.Errorf("stop pause: %w", err)
	} else {
		r.finishExitLater(ctx, id) // RemovePodSandbox deletes it too, if this has not yet
	}
	if err := errors.Join(taskErr, network()); err != nil {
		return fmt.Errorf("stop pod sandbox %s: %w", id, err)
	}
	if err := unmountSandboxShm(shmDir(r.sandboxDirOf(id, meta), false)); err != nil {
		return fmt.Errorf("stop pod sandbox %s: %w", id, err)
	}
	if err := r.setLabels(ctx, id, map[string]string{labelStopped: "true"}); err != nil {
		return fmt.Errorf("stop pod sandbox %s: record state: %w", id, err)
	}
	return nil
}

// RemovePodSandbox stops the sandbox if needed, removes its containers, the pause container and its files.
// Removing a sandbox that does not exist is not an error.
func (r *Runtime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	ctx = r.ns(ctx)
	unlock := r.sandboxLocks.lock(podSandboxID)
	defer unlock()
	rec, meta, err := r.loadSandbox(ctx, podSandboxID)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := r.stopSandbox(ctx, rec, meta); err != nil {
		return err
	}
	ctrs, err := r.sandboxContainers(ctx, podSandboxID)
	if err != nil {
		return err
	}
	for _, c := range ctrs {
		if err := r.RemoveContainer(ctx, c.ID); err != nil {
			return fmt.Errorf("remove pod sandbox %s: %w", podSandboxID, err)
		}
	}
	if err := r.deleteTask(ctx, podSandboxID); err != nil {
		return fmt.Errorf("remove pod sandbox %s: pause: %w", podSandboxID, err)
	}
	if err := r.deleteRecord(ctx, rec); err != nil {
		return fmt.Errorf("remove pod sandbox %s: delete pause container: %w", podSandboxID, err)
	}
	if err := removeAll(r.sandboxDirOf(rec.ID, meta)); err != nil {
		return fmt.Errorf("remove pod sandbox %s: %w", podSandboxID, err)
	}
	r.reapShim(ctx, rec.ID)
	return nil
}

func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
