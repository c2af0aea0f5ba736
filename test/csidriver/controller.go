package csidriver

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// CreateVolume makes the volume req.Name, whose ID is its name: a directory, or for block access a sparse
// image file of the capacity asked. The record is written before the data, so that a retry after a crash
// finds the record and finishes the data. A repeated call answers the same volume if it meets the request,
// ALREADY_EXISTS if not.
func (d *Driver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (_ *csi.CreateVolumeResponse, retErr error) {
	id := req.GetName()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	block, err := requestedAccess(req.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume content sources (snapshots, clones) are not supported")
	}
	capacity, err := capacityFor(req.GetCapacityRange(), block)
	if err != nil {
		return nil, err
	}
	if !topologyAllows(req.GetAccessibilityRequirements(), d.topology()) {
		return nil, status.Errorf(codes.ResourceExhausted, "no requisite topology is node %q", d.nodeID)
	}
	unlock := d.locks.lock(id)
	defer unlock()

	v, err := d.store.load(id)
	switch {
	case errors.Is(err, errNoVolume):
		v = &Volume{ID: id, CapacityBytes: capacity, Block: block}
		if err := d.store.save(v); err != nil {
			return nil, internal(err, "create volume %q", id)
		}
		defer func() {
			if retErr != nil {
				undoFailed("remove the record", id, d.store.remove(id))
			}
		}()
	case err != nil:
		return nil, internal(err, "create volume %q", id)
	case v.Ephemeral:
		return nil, status.Errorf(codes.AlreadyExists, "volume %q is an inline ephemeral volume", id)
	case !satisfies(v, block, req.GetCapacityRange()):
		return nil, status.Errorf(codes.AlreadyExists, "volume %q exists: %s, %d bytes", id, accessName(v.Block), v.CapacityBytes)
	}
	if err := d.makeData(v); err != nil {
		return nil, internal(err, "create volume %q", id)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           id,
		CapacityBytes:      v.CapacityBytes,
		AccessibleTopology: []*csi.Topology{{Segments: d.topology()}},
	}}, nil
}

// makeData makes v's data if it is missing: its directory, or its image file grown to its capacity.
func (d *Driver) makeData(v *Volume) error {
	p := d.store.dataPath(v.ID, v.Block)
	if !v.Block {
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		_, err := d.store.hasData(v.ID, false) // what is there must be a directory
		return err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return &fs.PathError{Op: "create image", Path: p, Err: errors.New("not a regular file")}
	case fi.Size() < v.CapacityBytes:
		return f.Truncate(v.CapacityBytes) // sparse
	}
	return nil
}

// DeleteVolume removes the volume's data and then its record. A volume unknown is deleted already; a volume
// still staged or published is FAILED_PRECONDITION.
func (d *Driver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()

	v, err := d.store.load(id)
	switch {
	case errors.Is(err, errNoVolume):
		return &csi.DeleteVolumeResponse{}, nil
	case err != nil:
		return nil, internal(err, "delete volume %q", id)
	}
	if where, err := d.inUse(v); err != nil {
		return nil, internal(err, "delete volume %q", id)
	} else if where != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is in use: %s", id, where)
	}
	if err := d.removeData(v); err != nil {
		return nil, err
	}
	if err := d.store.remove(id); err != nil {
		return nil, internal(err, "delete volume %q", id)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// removeData removes v's data; data already gone is no error. A directory with a mount below it is left
// alone (FAILED_PRECONDITION): removing it would reach into the mounted file system.
func (d *Driver) removeData(v *Volume) error {
	p := d.store.dataPath(v.ID, v.Block)
	ok, err := d.store.hasData(v.ID, v.Block)
	if err != nil {
		return internal(err, "remove volume %q", v.ID)
	}
	if !ok {
		return nil
	}
	if v.Block {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return internal(err, "remove volume %q", v.ID)
		}
		return nil
	}
	mounts, err := mountsBelow(p)
	if err != nil {
		return internal(err, "remove volume %q", v.ID)
	}
	if len(mounts) > 0 {
		return status.Errorf(codes.FailedPrecondition, "volume %q has mounts in its directory: %v", v.ID, mounts)
	}
	if err := os.RemoveAll(p); err != nil {
		return internal(err, "remove volume %q", v.ID)
	}
	return nil
}

// ValidateVolumeCapabilities confirms the capabilities when the volume can serve them all (its access type,
// any known access mode).
func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	unlock := d.locks.lock(id)
	defer unlock()

	v, err := d.load(id, "validate")
	if err != nil {
		return nil, err
	}
	if msg := unsupportedCapability(v, req.GetVolumeCapabilities()); msg != "" {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: msg}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// ControllerGetCapabilities reports create/delete, expansion, and the single-node access modes.
func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// ControllerExpandVolume records the volume's new capacity; a block volume's image grows to it (a staged
// one's loop device sees the new size on NodeExpandVolume). Volumes do not shrink.
func (d *Driver) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity range is required")
	}
	unlock := d.locks.lock(id)
	defer unlock()

	v, err := d.load(id, "expand")
	if err != nil {
		return nil, err
	}
	capacity, err := expandedCapacity(v.CapacityBytes, req.GetCapacityRange(), v.Block)
	if err != nil {
		return nil, err
	}
	if capacity > v.CapacityBytes {
		old := v.CapacityBytes
		v.CapacityBytes = capacity
		if v.Block {
			if err := d.makeData(v); err != nil {
				return nil, internal(err, "expand volume %q", id)
			}
		}
		if err := d.store.save(v); err != nil {
			return nil, internal(err, "expand volume %q", id)
		}
		klog.InfoS("Expanded volume", "volume", id, "from", old, "to", capacity)
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.CapacityBytes, NodeExpansionRequired: true}, nil
}

// undoFailed logs a rollback step that failed; the call's own error is what its caller sees.
func undoFailed(step, volumeID string, err error) {
	if err != nil {
		klog.ErrorS(err, "Undo failed", "step", step, "volume", volumeID)
	}
}
