package csidriver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeGetInfo reports the node's ID, its volume limit, and its topology segment.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             d.nodeID,
		MaxVolumesPerNode:  d.maxVolumes,
		AccessibleTopology: &csi.Topology{Segments: d.topology()},
	}, nil
}

// NodeGetCapabilities reports staging, stats, expansion, volume health (CSI 1.13's GET_VOLUME_HEALTH, which
// replaced the removed VOLUME_CONDITION) and the single-node access modes.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetVolumeStats reports a volume's usage at a path where it is staged or published: statfs of the path
// for a filesystem volume, the capacity for a block volume. A volume unknown, or not at the path, is
// NOT_FOUND.
func (d *Driver) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path is required")
	}
	unlock := d.locks.lock(id)
	defer unlock()

	v, err := d.load(id, "get stats of")
	if err != nil {
		return nil, err
	}
	p := filepath.Clean(req.GetVolumePath())
	if _, published := v.Published[p]; p != v.StagingPath && !published {
		return nil, status.Errorf(codes.NotFound, "volume %q is not staged or published at %s", id, req.GetVolumePath())
	}
	if v.Block {
		if _, err := os.Stat(p); err != nil {
			return nil, notFoundOr(err, "get stats of volume %q", id)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: blockUsage(v.CapacityBytes)}, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return nil, notFoundOr(err, "get stats of volume %q", id)
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: fsUsage(&st)}, nil
}

// NodeGetVolumeHealth reports whether the volume's data is there: INACCESSIBLE when its directory (or
// image) is gone, healthy otherwise.
func (d *Driver) NodeGetVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()

	v, err := d.load(id, "get health of")
	if err != nil {
		return nil, err
	}
	present, err := d.store.hasData(id, v.Block)
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: volumeHealth(id, d.store.dataPath(id, v.Block), present, err)}, nil
}

// NodeExpandVolume answers the volume's capacity, which ControllerExpandVolume set; a staged block volume's
// loop device is told its image grew. A capacity above the recorded one is OUT_OF_RANGE: the controller has
// not expanded the volume that far.
func (d *Driver) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path is required")
	}
	if err := checkRange(req.GetCapacityRange()); err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()

	v, err := d.load(id, "expand")
	if err != nil {
		return nil, err
	}
	if c := req.GetVolumeCapability(); c != nil {
		if block, err := capabilityAccess(c); err != nil {
			return nil, err
		} else if block != v.Block {
			return nil, status.Errorf(codes.InvalidArgument, "volume %q is a %s volume", id, accessName(v.Block))
		}
	}
	if _, err := os.Stat(req.GetVolumePath()); err != nil {
		return nil, notFoundOr(err, "expand volume %q", id)
	}
	if want := req.GetCapacityRange().GetRequiredBytes(); want > v.CapacityBytes {
		return nil, status.Errorf(codes.OutOfRange, "volume %q has %d bytes, less than the %d asked: ControllerExpandVolume grows it", id, v.CapacityBytes, want)
	}
	if v.Block {
		backs, err := loopBacks(v.LoopDevice, d.store.dataPath(id, true))
		if err != nil {
			return nil, internal(err, "expand volume %q", id)
		}
		if backs {
			if err := refreshLoopCapacity(v.LoopDevice); err != nil {
				return nil, internal(err, "expand volume %q", id)
			}
		}
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: v.CapacityBytes}, nil
}

// load is store.load with the errors as gRPC answers them: NOT_FOUND for a volume unknown.
func (d *Driver) load(id, what string) (*Volume, error) {
	v, err := d.store.load(id)
	switch {
	case errors.Is(err, errNoVolume):
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", id)
	case err != nil:
		return nil, internal(err, "%s volume %q", what, id)
	}
	return v, nil
}

// notFoundOr maps a missing path to NOT_FOUND, anything else to INTERNAL.
func notFoundOr(err error, format string, args ...any) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return status.Errorf(codes.NotFound, "%s: %v", fmt.Sprintf(format, args...), err)
	}
	return internal(err, format, args...)
}
