package csidriver

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// NodePublishVolume makes the volume available at the target path: a filesystem volume's staging path is
// bind-mounted onto it (read-only when asked: bind, then remount), a block volume's loop device node is
// bind-mounted onto a file there. An inline ephemeral volume (volume context csi.storage.k8s.io/ephemeral
// "true", never staged) gets a fresh directory, bind-mounted the same way. Publishing again with the same
// parameters is a no-op; see checkPublish for the rest. Each publication that succeeds is logged (see
// logPublication).
func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (_ *csi.NodePublishVolumeResponse, retErr error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	target, err := absPath("target path", req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	block, err := capabilityAccess(req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	if msg := req.GetVolumeContext()[FailPublishKey]; msg != "" {
		// Fault injection for the kubelet's tests: a volume whose attributes ask for it never publishes.
		return nil, status.Error(codes.Internal, msg)
	}
	if release := req.GetVolumeContext()[HangPublishKey]; release != "" {
		if err := d.hangUntil(ctx, release); err != nil {
			return nil, err
		}
	}
	defer func() {
		if retErr == nil {
			d.logPublication(id, target, req.GetVolumeContext())
		}
	}()
	ephemeral := req.GetVolumeContext()[EphemeralContextKey] == "true"
	switch {
	case ephemeral && block:
		return nil, status.Error(codes.InvalidArgument, "an inline ephemeral volume is a filesystem volume")
	case !ephemeral && req.GetStagingTargetPath() == "":
		return nil, status.Error(codes.FailedPrecondition, "staging target path is required: the volume is staged first")
	}
	want := Publication{
		ReadOnly:   req.GetReadonly(),
		Block:      block,
		AccessMode: req.GetVolumeCapability().GetAccessMode().GetMode().String(),
		MountFlags: req.GetVolumeCapability().GetMount().GetMountFlags(),
	}
	unlock := d.locks.lock(id)
	defer unlock()

	var v *Volume
	var source string
	if ephemeral {
		var undoData func() error
		if v, undoData, err = d.ephemeralVolume(id); err != nil {
			return nil, err
		}
		if undoData != nil {
			defer func() {
				if retErr != nil {
					undoFailed("remove the ephemeral volume's directory", id, undoData())
				}
			}()
		}
		source = d.store.dataPath(id, false)
	} else if v, source, err = d.stagedSource(id, req.GetStagingTargetPath(), block); err != nil {
		return nil, err
	}

	live, err := livePublications(v)
	if err != nil {
		return nil, internal(err, "publish volume %q", id)
	}
	if done, err := checkPublish(live, target, want); err != nil {
		return nil, err
	} else if done {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	undo, err := publish(source, target, want)
	if err != nil {
		return nil, err
	}
	live[target] = want
	v.Published = live
	if err := d.store.save(v); err != nil {
		undoFailed("undo the publication", id, undo())
		return nil, internal(err, "publish volume %q", id)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// ephemeralVolume returns the inline ephemeral volume id, making it on its first publication: its record
// first, so that an unpublish after a crash finds the directory to remove, then its directory. undo removes
// what was made (nil: nothing made).
func (d *Driver) ephemeralVolume(id string) (v *Volume, undo func() error, err error) {
	v, err = d.store.load(id)
	switch {
	case err == nil && !v.Ephemeral:
		return nil, nil, status.Errorf(codes.FailedPrecondition, "volume %q exists and is not an inline ephemeral volume", id)
	case err == nil:
		return v, nil, internalIf(d.makeData(v), "publish volume %q", id) // published before, or half-way
	case !errors.Is(err, errNoVolume):
		return nil, nil, internal(err, "publish volume %q", id)
	}
	v = &Volume{ID: id, Ephemeral: true}
	if err := d.store.save(v); err != nil {
		return nil, nil, internal(err, "make ephemeral volume %q", id)
	}
	if err := d.makeData(v); err != nil {
		undoFailed("remove the record", id, d.store.remove(id))
		return nil, nil, internal(err, "make ephemeral volume %q", id)
	}
	return v, func() error { return errors.Join(d.removeData(v), d.store.remove(id)) }, nil
}

// stagedSource returns the volume id and what its publication binds: the staging path where its directory
// is mounted, or its loop device. A volume not staged is FAILED_PRECONDITION.
func (d *Driver) stagedSource(id, staging string, block bool) (*Volume, string, error) {
	staging, err := absPath("staging target path", staging)
	if err != nil {
		return nil, "", err
	}
	v, err := d.load(id, "publish")
	switch {
	case err != nil:
		return nil, "", err
	case v.Ephemeral:
		return nil, "", status.Errorf(codes.FailedPrecondition, "volume %q is an inline ephemeral volume", id)
	case v.Block != block:
		return nil, "", status.Errorf(codes.FailedPrecondition, "volume %q is a %s volume", id, accessName(v.Block))
	}
	if block {
		backs, err := loopBacks(v.LoopDevice, d.store.dataPath(id, true))
		if err != nil {
			return nil, "", internal(err, "publish volume %q", id)
		}
		if !backs || v.StagingPath != staging {
			return nil, "", status.Errorf(codes.FailedPrecondition, "volume %q is not staged at %s", id, staging)
		}
		return v, v.LoopDevice, nil
	}
	staged, err := mountedFrom(staging, d.store.dataPath(id, false))
	if err != nil {
		return nil, "", internal(err, "publish volume %q", id)
	}
	if !staged {
		return nil, "", status.Errorf(codes.FailedPrecondition, "volume %q is not staged at %s", id, staging)
	}
	return v, staging, nil
}

// publish bind-mounts source onto target (a directory, or for a block volume a file, made if missing) with
// the publication's flags, and returns how to undo it. A target already bind-mounted from source (a driver
// killed before it recorded the publication) is taken as it is, if its read-only flag matches.
func publish(source, target string, want Publication) (undo func() error, err error) {
	flags, ignored := bindMountFlags(want.MountFlags, want.ReadOnly)
	if len(ignored) > 0 {
		klog.InfoS("Ignoring mount flags a bind mount cannot honour", "target", target, "flags", ignored)
	}
	if same, err := mountedFrom(target, source); err != nil {
		return nil, internal(err, "publish at %s", target)
	} else if same {
		var st unix.Statfs_t
		if err := unix.Statfs(target, &st); err != nil {
			return nil, internal(err, "publish at %s", target)
		}
		if (st.Flags&unix.ST_RDONLY != 0) != (flags&unix.MS_RDONLY != 0) {
			return nil, status.Errorf(codes.AlreadyExists, "volume is mounted at %s with another read-only flag", target)
		}
		return func() error { return unmountAll(target) }, nil
	}
	if mounted, err := isMountPoint(target); err != nil {
		return nil, internal(err, "publish at %s", target)
	} else if mounted {
		return nil, status.Errorf(codes.FailedPrecondition, "something else is mounted at %s", target)
	}

	created, err := makeTarget(target, want.Block)
	if err != nil {
		return nil, internal(err, "publish at %s", target)
	}
	removeTarget := func() error {
		if created {
			return removeIfExists(target)
		}
		return nil
	}
	if err := bindMount(source, target); err != nil {
		undoFailed("remove the target", "", removeTarget())
		return nil, internal(err, "publish at %s", target)
	}
	undo = func() error { return errors.Join(unmountAll(target), removeTarget()) }
	if err := applyBindFlags(target, flags); err != nil {
		undoFailed("undo the bind mount", "", undo())
		return nil, internal(err, "publish at %s", target)
	}
	return undo, nil
}

// makeTarget makes the target path (with its parents): a directory, or a file for a block volume's device
// node. It reports whether it made the target itself.
func makeTarget(target string, block bool) (created bool, err error) {
	if !block {
		if _, err := os.Lstat(target); err == nil {
			return false, nil
		}
		return true, os.MkdirAll(target, 0o750)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return false, err
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, f.Close()
}

// NodeUnpublishVolume unmounts the target path and removes it (the spec has the driver delete what it made
// there). A target not mounted, or gone, needs no unmount. An inline ephemeral volume goes with its last
// publication.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	target, err := absPath("target path", req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()

	if err := unmountAll(target); err != nil {
		return nil, internal(err, "unpublish volume %q", id)
	}
	if err := removeIfExists(target); err != nil {
		return nil, internal(err, "unpublish volume %q", id)
	}
	v, err := d.store.load(id)
	switch {
	case errors.Is(err, errNoVolume):
		return &csi.NodeUnpublishVolumeResponse{}, nil
	case err != nil:
		return nil, internal(err, "unpublish volume %q", id)
	}
	live, err := livePublications(v)
	if err != nil {
		return nil, internal(err, "unpublish volume %q", id)
	}
	if v.Ephemeral && len(live) == 0 {
		if err := d.removeData(v); err != nil {
			return nil, err
		}
		if err := d.store.remove(id); err != nil {
			return nil, internal(err, "unpublish volume %q", id)
		}
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if len(live) == len(v.Published) {
		return &csi.NodeUnpublishVolumeResponse{}, nil // nothing recorded to forget
	}
	v.Published = live
	if err := d.store.save(v); err != nil {
		return nil, internal(err, "unpublish volume %q", id)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// livePublications is v's recorded publications less those whose target path is no longer a mount point
// (unpublished, or gone with a reboot). It returns a new map.
func livePublications(v *Volume) (map[string]Publication, error) {
	live := make(map[string]Publication, len(v.Published))
	for t, p := range v.Published {
		mounted, err := isMountPoint(t)
		if err != nil {
			return nil, err
		}
		if mounted {
			live[t] = p
		}
	}
	return live, nil
}

// internalIf is internal(err, ...) for an error, nil for none.
func internalIf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return internal(err, format, args...)
}

// hangUntil waits until the file name is in the state directory, or ctx ends (the caller's deadline).
func (d *Driver) hangUntil(ctx context.Context, name string) error {
	if name != filepath.Base(name) || name == "." || name == ".." {
		return status.Errorf(codes.InvalidArgument, "%s must name a file of the state directory, not %q", HangPublishKey, name)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(filepath.Join(d.store.dir, name)); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-tick.C:
		}
	}
}

// PublicationRecord is a line of the state directory's PublicationLog: a NodePublishVolume call that succeeded,
// with what the kubelet said of the pod in the volume context (its name and the service account tokens a
// CSIDriver's tokenRequests ask for), so that tests see what a driver is given, and each republication.
type PublicationRecord struct {
	Volume string `json:"volume"`
	Target string `json:"target"`
	Pod    string `json:"pod,omitempty"`
	Tokens string `json:"tokens,omitempty"`
}

// PublicationLog is the file, in the state directory, the driver appends a PublicationRecord to per
// successful NodePublishVolume.
const PublicationLog = "publications" + logSuffix

// logPublication appends the call's record to the publication log; a failure is only logged.
func (d *Driver) logPublication(id, target string, volumeContext map[string]string) {
	b, err := json.Marshal(PublicationRecord{Volume: id, Target: target, Pod: volumeContext[PodNameContextKey],
		Tokens: volumeContext[TokensContextKey]})
	if err == nil {
		var f *os.File
		if f, err = os.OpenFile(filepath.Join(d.store.dir, PublicationLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			_, err = f.Write(append(b, '\n'))
			err = errors.Join(err, f.Close())
		}
	}
	if err != nil {
		klog.ErrorS(err, "Cannot log a publication", "volume", id)
	}
}
