package runtime

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/containerd/containerd/api/types/task"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime/specopts"
)

// CreateContainer creates a container in the sandbox, joined to the pause container's namespaces. It does
// not start it.
func (r *Runtime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (_ string, retErr error) {
	ctx = r.ns(ctx)
	name := config.GetMetadata().GetName()
	if name == "" {
		return "", fmt.Errorf("create container: metadata name is required")
	}
	sbRec, err := r.findContainer(ctx, podSandboxID, kindSandbox)
	if err != nil {
		return "", fmt.Errorf("create container %q: pod sandbox %q: %w", name, podSandboxID, err)
	}
	sbMeta, err := r.records.metas.sandbox(sbRec)
	if err != nil {
		return "", fmt.Errorf("create container %q: %w", name, err)
	}
	podRef := sbMeta.Metadata.Namespace + "/" + sbMeta.Metadata.Name
	fail := func(step string, err error) error {
		return fmt.Errorf("create container %q of pod %s: %s: %w", name, podRef, step, err)
	}
	pausePID, err := r.pausePID(ctx, sbRec.ID)
	if err != nil {
		return "", fail("sandbox is not running", err)
	}
	targetPID := pausePID
	if ns := config.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() == runtimeapi.NamespaceMode_TARGET {
		if targetPID, err = r.targetPID(ctx, sbRec.ID, ns.GetTargetId()); err != nil {
			return "", fail("target container", err)
		}
	}
	// A container of a pod in a user namespace joins the pause container's (WithPodNamespaces), its root
	// filesystem ID-mapped by the same mappings.
	uids, gids, err := specopts.PodUserNamespace(config.GetLinux().GetSecurityContext().GetNamespaceOptions())
	if err != nil {
		return "", fail("user namespace", err)
	}
	if (uids != nil) != (sbMeta.Userns != nil) {
		return "", fail("user namespace", fmt.Errorf("the container's options (a pod user namespace: %v) do not match its sandbox's (%v)", uids != nil, sbMeta.Userns != nil))
	}
	var remap []snapshots.Opt
	if uids != nil {
		remap = append(remap, remapLabels(uids, gids))
	}
	image, facts, err := r.resolveImage(ctx, config.GetImage().GetImage())
	if err != nil {
		return "", fail("image", err)
	}
	imgConfig := &facts.config.Config

	id := newID()
	meta := &containerMeta{
		Metadata:    config.GetMetadata(),
		SandboxID:   sbRec.ID,
		Labels:      config.GetLabels(),
		Annotations: config.GetAnnotations(),
		Image:       config.GetImage().GetImage(),
		ImageRef:    facts.configDigest.String(),
		Mounts:      config.GetMounts(),
		StopSignal:  imgConfig.StopSignal,
		Stdin:       config.GetStdin(),
		StdinOnce:   config.GetStdinOnce(),
		TTY:         config.GetTty(),
		CreatedAt:   r.clock.Now().UnixNano(),
	}
	if config.GetLogPath() != "" && sbMeta.LogDirectory != "" {
		meta.LogPath = filepath.Join(sbMeta.LogDirectory, config.GetLogPath())
	}
	if sbMeta.CgroupParent != "" {
		meta.CgroupsPath = cgroupsPath(sbMeta.CgroupParent, id)
	}

	lctx, err := r.withLease(ctx)
	if err != nil {
		return "", fail("lease", err)
	}
	config, labels, err := r.mountImageVolumes(lctx, id, config)
	if err != nil {
		return "", fail("mounts", err)
	}
	specOpts, err := r.containerSpecOpts(id, pausePID, targetPID, sbMeta, meta, config, imgConfig)
	if err != nil {
		r.undoImageVolumes(lctx, id)
		return "", fail("spec", err)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelKind], labels[labelSandboxID] = kindContainer, sbRec.ID
	labels[labelPodUID] = podUIDLabel(config.GetLabels(), podUIDLabel(sbMeta.Labels, sbMeta.Metadata.Uid))
	_, err = r.client.NewContainer(lctx, id,
		r.withImageSnapshot(id, image, facts, remap...),
		containerd.WithRuntime("io.containerd.runc.v2", runcOptions(sbMeta.CgroupParent)),
		containerd.WithNewSpec(specOpts...),
		containerd.WithContainerLabels(labels),
		containerd.WithContainerExtension(extensionMeta, meta),
	)
	if err != nil {
		r.removeSnapshot(lctx, id)
		r.undoImageVolumes(lctx, id)
		return "", fail("create", err)
	}
	logger(ctx).V(2).Info("Created container", "pod", podRef, "container", name, "id", id)
	return id, nil
}

// removeSnapshot removes the writable snapshot a failed create prepared (the spec failed after it: an unknown
// user, a bad mount) and its entry in the shared lease, so nothing is left for the hour the lease lives. It
// runs even when ctx is done.
func (r *Runtime) removeSnapshot(ctx context.Context, key string) {
	l, leased := leases.FromContext(ctx)
	ctx, cancel := r.cleanupContext(ctx)
	defer cancel()
	if err := r.client.SnapshotService(r.cfg.Snapshotter).Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
		logger(ctx).Error(err, "Removing the snapshot of a container that failed to create", "snapshot", key)
	}
	if leased {
		err := r.client.LeasesService().DeleteResource(ctx, leases.Lease{ID: l}, leases.Resource{ID: key, Type: "snapshots/" + r.cfg.Snapshotter})
		if err != nil && !errdefs.IsNotFound(err) {
			logger(ctx).Error(err, "Removing a failed container's snapshot from its lease failed; the lease's expiry frees it", "snapshot", key)
		}
	}
}

// undoImageVolumes removes the image volumes of a container that failed to create; it runs even when ctx
// is done.
func (r *Runtime) undoImageVolumes(ctx context.Context, id string) {
	ctx, cancel := r.cleanupContext(ctx)
	defer cancel()
	if err := r.unmountImageVolumes(ctx, id); err != nil {
		logger(ctx).Error(err, "Removing the image volumes of a container that failed to create", "id", id)
	}
}

// targetPID is the PID of a running container of the sandbox, whose process namespace a new container with
// NamespaceMode TARGET joins (an ephemeral container debugging it).
func (r *Runtime) targetPID(ctx context.Context, sandboxID, id string) (uint32, error) {
	rec, err := r.findContainer(ctx, id, kindContainer)
	if err != nil {
		return 0, fmt.Errorf("container %q: %w", id, err)
	}
	if rec.Labels[labelSandboxID] != sandboxID {
		return 0, fmt.Errorf("container %q is not in pod sandbox %q: %w", id, sandboxID, errdefs.ErrInvalidArgument)
	}
	t, err := r.taskOf(ctx, rec.ID)
	if err != nil {
		return 0, err
	}
	if t == nil || t.GetStatus() != task.Status_RUNNING {
		return 0, fmt.Errorf("container %q is not running: %w", id, errdefs.ErrFailedPrecondition)
	}
	return t.GetPid(), nil
}

// pausePID is the PID of a sandbox's pause process, whose namespaces a new container joins.
func (r *Runtime) pausePID(ctx context.Context, sandboxID string) (uint32, error) {
	t, err := r.taskOf(ctx, sandboxID)
	if err != nil {
		return 0, err
	}
	if t == nil {
		return 0, fmt.Errorf("no task: %w", errdefs.ErrNotFound)
	}
	return t.GetPid(), nil
}
