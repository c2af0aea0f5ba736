package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image volumes (a CRI mount with an image, Kubernetes' volumes[].image): each is a read-only view of the
// image's snapshot, mounted on the host under StateDir/image-volumes/<container>/<n> and bound into the
// container read-only, nosuid and nodev (its programs run, as on containerd's CRI plugin), the image's
// subPath only (a directory) when the mount names one. A mount that is not read-only is refused, as
// containerd refuses it. The
// view's key derives from the container's ID, and the container record refers to it (a garbage collection
// reference label), so a restarted runtime finds and removes it with the container.

func (r *Runtime) imageVolumeDir(containerID string) string {
	return filepath.Join(r.cfg.StateDir, "image-volumes", containerID)
}

func imageVolumeKey(containerID, n string) string { return containerID + "-imagevol-" + n }

// mountImageVolumes mounts the image volumes of config for container id and returns the config with their
// host paths set, and the labels that keep their snapshots while the container exists. On error nothing of
// them is left.
func (r *Runtime) mountImageVolumes(ctx context.Context, id string, config *runtimeapi.ContainerConfig) (_ *runtimeapi.ContainerConfig, labels map[string]string, retErr error) {
	var out *runtimeapi.ContainerConfig
	for i, m := range config.GetMounts() {
		if m.GetImage() == nil {
			continue
		}
		if !m.GetReadonly() {
			return nil, nil, fmt.Errorf("image volume at %s: readonly must be true while mounting an image", m.GetContainerPath())
		}
		if out == nil {
			out = proto.Clone(config).(*runtimeapi.ContainerConfig)
			labels = map[string]string{}
			defer func() {
				if retErr != nil {
					r.unmountImageVolumes(ctx, id)
				}
			}()
		}
		n := strconv.Itoa(i)
		path, err := r.mountImageVolume(ctx, id, n, m)
		if err != nil {
			return nil, nil, fmt.Errorf("image volume at %s: %w", m.GetContainerPath(), err)
		}
		om := out.Mounts[i]
		om.HostPath, om.Readonly = path, true
		labels["containerd.io/gc.ref.snapshot."+r.cfg.Snapshotter+"/imagevol-"+n] = imageVolumeKey(id, n)
	}
	if out == nil {
		return config, nil, nil
	}
	return out, labels, nil
}

// mountImageVolume mounts one image's read-only view and returns the host path to bind: the view's root,
// or the subPath inside it.
func (r *Runtime) mountImageVolume(ctx context.Context, id, n string, m *runtimeapi.Mount) (string, error) {
	img, facts, err := r.resolveImage(ctx, m.GetImage().GetImage())
	if err != nil {
		return "", err
	}
	sn := r.client.SnapshotService(r.cfg.Snapshotter)
	key := imageVolumeKey(id, n)
	mounts, err := sn.View(ctx, key, facts.chainID.String())
	if errdefs.IsNotFound(err) {
		if uerr := r.client.Image(img).Unpack(ctx, r.cfg.Snapshotter); uerr != nil {
			return "", fmt.Errorf("unpack image %s: %w", img.Name, uerr)
		}
		mounts, err = sn.View(ctx, key, facts.chainID.String())
	}
	if err != nil {
		return "", fmt.Errorf("view of image %s: %w", img.Name, err)
	}
	target := filepath.Join(r.imageVolumeDir(id), n)
	if err := os.MkdirAll(target, 0o700); err != nil {
		return "", err
	}
	if err := mount.All(mounts, target); err != nil {
		return "", fmt.Errorf("mount image %s: %w", img.Name, err)
	}
	// The view is read-only already (an overlay without an upper directory, or a read-only bind of the one
	// layer); the container's bind adds nosuid and nodev.
	sub := m.GetImageSubPath()
	if sub == "" {
		return target, nil
	}
	path, err := securejoin.SecureJoin(target, sub)
	if err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	// A directory only, as containerd's CRI plugin requires (a single file is a non-goal of image volumes).
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("subPath %q of image %s: %w", sub, img.Name, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("subPath %q of image %s is not a directory: only a directory subPath is supported", sub, img.Name)
	}
	return path, nil
}

// unmountImageVolumes unmounts and removes what mountImageVolumes made for container id; it is a no-op for a
// container without image volumes, and safe to repeat (a restarted runtime, a host rebooted meanwhile).
func (r *Runtime) unmountImageVolumes(ctx context.Context, id string) error {
	dir := r.imageVolumeDir(id)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sn := r.client.SnapshotService(r.cfg.Snapshotter)
	var errs []error
	for _, e := range entries {
		target := filepath.Join(dir, e.Name())
		// Not mounted: the host rebooted, or the mount failed; only the snapshot and the directory are left.
		if mounted, err := mountinfo.Mounted(target); err != nil || mounted {
			if err := mount.UnmountAll(target, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmount image volume %s: %w", e.Name(), err))
				continue
			}
		}
		if err := sn.Remove(ctx, imageVolumeKey(id, e.Name())); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove image volume snapshot %s: %w", e.Name(), err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return os.RemoveAll(dir)
}

// removeOrphanImageVolumes removes, at start, the image volumes of containers that have no record: a process
// killed between mounting them and creating the record left them. Failures are logged; the next start tries
// again.
func (r *Runtime) removeOrphanImageVolumes(ctx context.Context, recs []containers.Container) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.StateDir, "image-volumes"))
	if err != nil {
		return // none yet
	}
	known := map[string]bool{}
	for _, rec := range recs {
		known[rec.ID] = true
	}
	for _, e := range entries {
		if known[e.Name()] {
			continue
		}
		if err := r.unmountImageVolumes(ctx, e.Name()); err != nil {
			logger(ctx).Error(err, "Removing the image volumes of a container never created", "id", e.Name())
			continue
		}
		logger(ctx).Info("Removed the image volumes of a container never created", "id", e.Name())
	}
}
