package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

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
	if r.withLabelsInFlight(rec).Labels[labelStopped] == "true" {
		// A stop that finished (the label is its last step): the kubelet's RemovePodSandbox after its
		// StopPodSandbox need not run the CNI plugins again.
		return nil
	}
	start := time.Now()
	ctrs, err := r.sandboxContainers(ctx, id)
	if err != nil {
		return err
	}
	for _, c := range ctrs {
		if r.withLabelsInFlight(c).Labels[labelFinishedAt] != "" {
			continue // its exit is recorded or announced: nothing to stop
		}
		if err := r.StopContainer(ctx, c.ID, 0); err != nil {
			return fmt.Errorf("stop pod sandbox %s: %w", id, err)
		}
	}
	containersStopped := time.Now()
	// The network is detached while the pause container goes: the one waits on containerd and the shim, the
	// other on the plugins and the kernel, and neither needs the other (the pause process uses no network).
	var networkTook time.Duration
	network := inBackground(func() error {
		defer func(began time.Time) { networkTook = time.Since(began) }(time.Now())
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
	pauseTook := time.Since(containersStopped)
	if err := errors.Join(taskErr, network()); err != nil {
		return fmt.Errorf("stop pod sandbox %s: %w", id, err)
	}
	if err := unmountSandboxShm(shmDir(r.sandboxDirOf(id, meta), false)); err != nil {
		return fmt.Errorf("stop pod sandbox %s: %w", id, err)
	}
	r.recordStopLater(ctx, id)
	logger(ctx).V(3).Info("Stopped pod sandbox", "pod", meta.Metadata.GetNamespace()+"/"+meta.Metadata.GetName(), "sandbox", id,
		"took", time.Since(start), "containers", containersStopped.Sub(start), "pause", pauseTook, "network", networkTook)
	return nil
}

// recordStopLater records a stopped sandbox in its labels off the caller's path, as an exit is (recordStop):
// views read the stop from labelsInFlight until containerd has written it (hundreds of milliseconds when many
// pods stop at once). Should the write fail or this process die first, the sandbox shows as not stopped and
// is stopped again: every step of a stop is idempotent. Close waits for these writes.
func (r *Runtime) recordStopLater(ctx context.Context, id string) {
	stopped := map[string]string{labelStopped: "true"}
	r.labelsInFlight.Store(id, stopped)
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		cctx, cancel := r.cleanupContext(ctx)
		defer cancel()
		err := r.setLabels(cctx, id, stopped)
		r.labelsInFlight.Delete(id)
		if err != nil && !errdefs.IsNotFound(err) { // a sandbox removed meanwhile has nothing to record
			logger(ctx).Error(err, "Recording a stopped sandbox failed", "sandbox", id)
		}
	}()
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
