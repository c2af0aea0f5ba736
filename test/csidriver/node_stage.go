package csidriver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// NodeStageVolume makes the volume ready on the node: a filesystem volume's directory is bind-mounted onto
// the staging path; a block volume's image is attached to a loop device, which the record remembers. A
// volume ID never created (static provisioning) gets its directory now. Staging again at the same path is a
// no-op; staging at a second path while staged at the first is FAILED_PRECONDITION.
func (d *Driver) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	staging, err := absPath("staging target path", req.GetStagingTargetPath())
	if err != nil {
		return nil, err
	}
	block, err := capabilityAccess(req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()

	v, err := d.store.load(id)
	switch {
	case errors.Is(err, errNoVolume) && !block:
		v = &Volume{ID: id, Static: true} // static provisioning: stageFilesystem makes the directory
	case errors.Is(err, errNoVolume):
		return nil, status.Errorf(codes.NotFound, "block volume %q does not exist", id)
	case err != nil:
		return nil, internal(err, "stage volume %q", id)
	case v.Ephemeral:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is an inline ephemeral volume", id)
	case v.Block != block:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is a %s volume", id, accessName(v.Block))
	}
	if v.StagingPath != "" && v.StagingPath != staging {
		if where, err := d.staged(v); err != nil {
			return nil, internal(err, "stage volume %q", id)
		} else if where != "" {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %q is %s", id, where)
		}
	}

	var undo func() error
	if block {
		undo, err = d.stageBlock(v)
	} else {
		undo, err = d.stageFilesystem(v, staging)
	}
	if err != nil {
		return nil, err
	}
	v.StagingPath = staging
	if err := d.store.save(v); err != nil {
		if undo != nil {
			undoFailed("undo the staging", id, undo())
		}
		return nil, internal(err, "stage volume %q", id)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// stageFilesystem bind-mounts v's directory onto the staging path (made if missing), unless it is there
// already. It returns how to undo what it did (nil: nothing done).
func (d *Driver) stageFilesystem(v *Volume, staging string) (undo func() error, err error) {
	data := d.store.dataPath(v.ID, false)
	ok, err := d.store.hasData(v.ID, false)
	switch {
	case err != nil:
		return nil, internal(err, "stage volume %q", v.ID)
	case !ok && !v.Static:
		return nil, status.Errorf(codes.NotFound, "the data of volume %q (%s) is gone", v.ID, data)
	case !ok:
		if err := os.Mkdir(data, 0o755); err != nil {
			return nil, internal(err, "make the directory of static volume %q", v.ID)
		}
		defer func() {
			if err != nil {
				undoFailed("remove the static volume's directory", v.ID, os.Remove(data))
			}
		}()
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, internal(err, "stage volume %q", v.ID)
	}
	if mounted, err := isMountPoint(staging); err != nil {
		return nil, internal(err, "stage volume %q", v.ID)
	} else if mounted {
		if same, err := sameFile(staging, data); err != nil {
			return nil, internal(err, "stage volume %q", v.ID)
		} else if !same {
			return nil, status.Errorf(codes.FailedPrecondition, "something else is mounted at %s", staging)
		}
		return nil, nil // staged already
	}
	if err := bindMount(data, staging); err != nil {
		return nil, internal(err, "stage volume %q", v.ID)
	}
	return func() error { return unmountAll(staging) }, nil
}

// stageBlock attaches v's image to a loop device, unless the recorded device backs it already, and records
// the device. It returns how to undo what it did (nil: nothing done).
func (d *Driver) stageBlock(v *Volume) (undo func() error, err error) {
	img := d.store.dataPath(v.ID, true)
	if ok, err := d.store.hasData(v.ID, true); err != nil {
		return nil, internal(err, "stage volume %q", v.ID)
	} else if !ok {
		return nil, status.Errorf(codes.NotFound, "the image of volume %q (%s) is gone", v.ID, img)
	}
	if backs, err := loopBacks(v.LoopDevice, img); err != nil {
		return nil, internal(err, "stage volume %q", v.ID)
	} else if backs {
		return nil, nil // staged already
	}
	dev, err := attachLoop(img)
	if err != nil {
		return nil, internal(err, "stage volume %q", v.ID)
	}
	v.LoopDevice = dev
	klog.InfoS("Attached loop device", "volume", v.ID, "device", dev, "image", img)
	return func() error { return detachLoop(dev, img) }, nil
}

// NodeUnstageVolume undoes NodeStageVolume at the staging path: it unmounts the volume's directory, or
// detaches its loop device. A volume not staged there (or unknown) needs nothing.
func (d *Driver) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	staging, err := absPath("staging target path", req.GetStagingTargetPath())
	if err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()

	v, err := d.store.load(id)
	switch {
	case errors.Is(err, errNoVolume):
		return &csi.NodeUnstageVolumeResponse{}, nil
	case err != nil:
		return nil, internal(err, "unstage volume %q", id)
	}
	data := d.store.dataPath(id, v.Block)
	ours := v.StagingPath == staging
	if v.Block {
		// Nothing is mounted at a block volume's staging path: staging attached its loop device.
		if !ours && v.StagingPath != "" {
			return &csi.NodeUnstageVolumeResponse{}, nil // staged at another path
		}
		if err := detachLoop(v.LoopDevice, data); err != nil {
			return nil, internal(err, "unstage volume %q", id)
		}
		if v.LoopDevice != "" {
			klog.InfoS("Detached loop device", "volume", id, "device", v.LoopDevice)
		}
	} else {
		if !ours {
			// Not recorded (a driver killed before it saved the record): the mount tells.
			if ours, err = mountedFrom(staging, data); err != nil {
				return nil, internal(err, "unstage volume %q", id)
			}
		}
		if !ours {
			return &csi.NodeUnstageVolumeResponse{}, nil
		}
		if err := unmountAll(staging); err != nil {
			return nil, internal(err, "unstage volume %q", id)
		}
	}
	if v.StagingPath == "" && v.LoopDevice == "" {
		return &csi.NodeUnstageVolumeResponse{}, nil // nothing recorded to forget
	}
	v.StagingPath, v.LoopDevice = "", ""
	if err := d.store.save(v); err != nil {
		return nil, internal(err, "unstage volume %q", id)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// staged says where v is staged ("" when it is not): its loop device backs its image, or its staging path
// is still a mount point.
func (d *Driver) staged(v *Volume) (string, error) {
	if v.Block {
		backs, err := loopBacks(v.LoopDevice, d.store.dataPath(v.ID, true))
		if err != nil || !backs {
			return "", err
		}
		return fmt.Sprintf("staged at %s (loop device %s)", v.StagingPath, v.LoopDevice), nil
	}
	if v.StagingPath == "" {
		return "", nil
	}
	mounted, err := isMountPoint(v.StagingPath)
	if err != nil || !mounted {
		return "", err
	}
	return "staged at " + v.StagingPath, nil
}

// inUse says how v is in use on the node ("" when it is not): staged, or published at a target path that
// is still a mount point.
func (d *Driver) inUse(v *Volume) (string, error) {
	if where, err := d.staged(v); err != nil || where != "" {
		return where, err
	}
	live, err := livePublications(v)
	if err != nil {
		return "", err
	}
	for t := range live {
		return "published at " + t, nil
	}
	return "", nil
}

// absPath checks a path argument: required (InvalidArgument), absolute, and cleaned.
func absPath(what, p string) (string, error) {
	switch {
	case p == "":
		return "", status.Errorf(codes.InvalidArgument, "%s is required", what)
	case !filepath.IsAbs(p):
		return "", status.Errorf(codes.InvalidArgument, "%s %q is not absolute", what, p)
	}
	return filepath.Clean(p), nil
}

// removeIfExists removes path; a path already gone is no error.
func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
