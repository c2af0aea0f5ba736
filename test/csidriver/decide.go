package csidriver

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The pure decisions of the driver: each takes what a call asked and what the driver knows, and answers
// without touching the host. Errors are gRPC status errors with the code the CSI spec asks for.

const (
	// defaultCapacity is a new volume's capacity when CreateVolume names none.
	defaultCapacity int64 = 1 << 30
	// sectorSize aligns a block volume's image: a loop device ignores a trailing partial sector.
	sectorSize int64 = 512
)

// capabilityAccess returns whether c asks for a block volume (else a mounted filesystem). A missing
// capability, access type or access mode is an InvalidArgument error.
func capabilityAccess(c *csi.VolumeCapability) (block bool, err error) {
	if c == nil {
		return false, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	if m := c.GetAccessMode().GetMode(); !knownAccessMode(m) {
		return false, status.Errorf(codes.InvalidArgument, "access mode %v is not supported", m)
	}
	switch {
	case c.GetBlock() != nil:
		return true, nil
	case c.GetMount() != nil:
		return false, nil
	}
	return false, status.Error(codes.InvalidArgument, "volume capability names no access type (mount or block)")
}

// knownAccessMode reports whether m is an access mode the driver serves: any but UNKNOWN. Multi-node modes
// are accepted as the upstream hostpath driver accepts them; they mean something only on a one-node cluster.
func knownAccessMode(m csi.VolumeCapability_AccessMode_Mode) bool {
	_, ok := csi.VolumeCapability_AccessMode_Mode_name[int32(m)]
	return ok && m != csi.VolumeCapability_AccessMode_UNKNOWN
}

// requestedAccess returns whether CreateVolume's capabilities ask for a block volume. They must all ask
// for the same access type: one volume is either an image file or a directory.
func requestedAccess(caps []*csi.VolumeCapability) (block bool, err error) {
	if len(caps) == 0 {
		return false, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for i, c := range caps {
		b, err := capabilityAccess(c)
		if err != nil {
			return false, err
		}
		if i > 0 && b != block {
			return false, status.Error(codes.InvalidArgument, "volume capabilities ask for both block and mount access")
		}
		block = b
	}
	return block, nil
}

// checkRange rejects a capacity range no volume can meet.
func checkRange(r *csi.CapacityRange) error {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case req < 0 || lim < 0:
		return status.Errorf(codes.InvalidArgument, "capacity range [%d, %d] is negative", req, lim)
	case lim > 0 && req > lim:
		return status.Errorf(codes.InvalidArgument, "required bytes %d exceed the limit %d", req, lim)
	}
	return nil
}

// align rounds a block volume's capacity up to whole sectors and checks it stays within the limit.
func align(capacity int64, r *csi.CapacityRange, block bool) (int64, error) {
	if block && capacity%sectorSize != 0 {
		if capacity > math.MaxInt64-sectorSize {
			return 0, status.Errorf(codes.OutOfRange, "capacity %d is too large", capacity)
		}
		capacity += sectorSize - capacity%sectorSize
	}
	if lim := r.GetLimitBytes(); lim > 0 && capacity > lim {
		return 0, status.Errorf(codes.OutOfRange, "capacity %d (whole %d-byte sectors) exceeds the limit %d", capacity, sectorSize, lim)
	}
	return capacity, nil
}

// capacityFor is a new volume's capacity: the required bytes, else the default held to the limit; a block
// volume's rounded up to whole sectors.
func capacityFor(r *csi.CapacityRange, block bool) (int64, error) {
	if err := checkRange(r); err != nil {
		return 0, err
	}
	c := r.GetRequiredBytes()
	if c == 0 {
		c = defaultCapacity
		if lim := r.GetLimitBytes(); lim > 0 && lim < c {
			c = lim
		}
	}
	return align(c, r, block)
}

// satisfies reports whether an existing volume answers a repeated CreateVolume: same access type, and a
// capacity within the requested range. If not, the name is taken (ALREADY_EXISTS).
func satisfies(v *Volume, block bool, r *csi.CapacityRange) bool {
	lim := r.GetLimitBytes()
	return v.Block == block && v.CapacityBytes >= r.GetRequiredBytes() && (lim == 0 || v.CapacityBytes <= lim)
}

// expandedCapacity is a volume's capacity after ControllerExpandVolume: the required bytes (else the
// limit), never less than the current capacity, as volumes do not shrink.
func expandedCapacity(current int64, r *csi.CapacityRange, block bool) (int64, error) {
	if r == nil {
		return 0, status.Error(codes.InvalidArgument, "capacity range is required")
	}
	if err := checkRange(r); err != nil {
		return 0, err
	}
	want := r.GetRequiredBytes()
	if want == 0 {
		want = r.GetLimitBytes()
	}
	if want <= current {
		return current, nil
	}
	return align(want, r, block)
}

// unsupportedCapability says why v cannot serve one of caps, or "" when it serves them all
// (ValidateVolumeCapabilities confirms then).
func unsupportedCapability(v *Volume, caps []*csi.VolumeCapability) string {
	for _, c := range caps {
		block, err := capabilityAccess(c)
		if err != nil {
			return status.Convert(err).Message()
		}
		if block != v.Block {
			return fmt.Sprintf("volume %q is a %s volume", v.ID, accessName(v.Block))
		}
	}
	return ""
}

func accessName(block bool) string {
	if block {
		return "block"
	}
	return "filesystem"
}

// topologyAllows reports whether a volume accessible from the topology node (this node's segments) meets
// CreateVolume's accessibility requirements: with requisite topologies, one of them must be the node's
// (for the keys it names); preferred topologies only rank, and the driver has one node to offer.
func topologyAllows(req *csi.TopologyRequirement, node map[string]string) bool {
	if len(req.GetRequisite()) == 0 {
		return true
	}
	for _, t := range req.GetRequisite() {
		match := true
		for k, v := range t.GetSegments() {
			if node[k] != v {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// bindMountFlags maps CSI mount flags to what a bind mount can honour on remount; the others (file system
// options, which a bind mount of a directory does not have) come back as ignored. readOnly adds MS_RDONLY.
func bindMountFlags(mountFlags []string, readOnly bool) (flags uintptr, ignored []string) {
	for _, f := range mountFlags {
		switch f {
		case "ro":
			flags |= unix.MS_RDONLY
		case "nosuid":
			flags |= unix.MS_NOSUID
		case "nodev":
			flags |= unix.MS_NODEV
		case "noexec":
			flags |= unix.MS_NOEXEC
		case "noatime":
			flags |= unix.MS_NOATIME
		case "nodiratime":
			flags |= unix.MS_NODIRATIME
		case "relatime":
			flags |= unix.MS_RELATIME
		case "strictatime":
			flags |= unix.MS_STRICTATIME
		case "rw", "bind", "defaults", "suid", "dev", "exec", "atime", "diratime":
			// What a bind mount is anyway.
		default:
			ignored = append(ignored, f)
		}
	}
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	return flags, ignored
}

// remountFlags are the flags of the bind remount that applies want to a new bind mount whose statfs flags
// are have: the mount's own nosuid, nodev, noexec and atime flags are kept (the kernel refuses to clear them
// in a user namespace, and nothing asked to), want's added; atime flags in want replace the mount's.
func remountFlags(have int64, want uintptr) uintptr {
	keep := []struct {
		st int64
		ms uintptr
	}{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	}
	const atime = unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME | unix.MS_STRICTATIME
	var flags uintptr = unix.MS_BIND | unix.MS_REMOUNT
	for _, k := range keep {
		if have&k.st != 0 && (want&atime == 0 || k.ms&atime == 0) {
			flags |= k.ms
		}
	}
	return flags | want
}

// checkPublish decides a NodePublishVolume from the volume's live publications (target path -> the
// parameters it was published with). It answers done when target is published with the same parameters
// (the call is a repeat), ALREADY_EXISTS when target is published with others, FAILED_PRECONDITION when a
// SINGLE_NODE_SINGLE_WRITER publication would share the volume with another target path; otherwise the
// publication is to be made. Only SINGLE_NODE_SINGLE_WRITER excludes other target paths: the kubelet
// publishes a SINGLE_NODE_WRITER volume once for each pod on the node that uses it.
func checkPublish(published map[string]Publication, target string, want Publication) (done bool, err error) {
	if have, ok := published[target]; ok {
		if samePublication(have, want) {
			return true, nil
		}
		return false, status.Errorf(codes.AlreadyExists, "volume is published at %s with other parameters (%+v, asked %+v)", target, have, want)
	}
	single := csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER.String()
	others := make([]string, 0, len(published))
	for t, p := range published {
		if t != target && (want.AccessMode == single || p.AccessMode == single) {
			others = append(others, t)
		}
	}
	if len(others) > 0 {
		sort.Strings(others)
		return false, status.Errorf(codes.FailedPrecondition, "volume is published for a single writer at %s", strings.Join(others, ", "))
	}
	return false, nil
}

func samePublication(a, b Publication) bool {
	return a.ReadOnly == b.ReadOnly && a.Block == b.Block && a.AccessMode == b.AccessMode && slices.Equal(a.MountFlags, b.MountFlags)
}

// Reasons in a VolumeHealth entry.
const (
	reasonDataMissing    = "VolumeDataMissing"
	reasonDataUnreadable = "VolumeDataUnreadable"
)

// volumeHealth is what NodeGetVolumeHealth reports for a volume whose data (dataPath) was found present or
// not (checkErr: the check failed): healthy (no entry), or INACCESSIBLE with the reason. It takes the place
// of VolumeCondition (abnormal, message), which CSI 1.13 removed.
func volumeHealth(id, dataPath string, present bool, checkErr error) *csi.VolumeHealth {
	h := &csi.VolumeHealth{VolumeId: id}
	switch {
	case checkErr != nil:
		h.HealthStatuses = []*csi.VolumeHealth_VolumeHealthEntry{{
			Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: reasonDataUnreadable,
			Message: fmt.Sprintf("checking the volume's data %s: %v", dataPath, checkErr),
		}}
	case !present:
		h.HealthStatuses = []*csi.VolumeHealth_VolumeHealthEntry{{
			Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: reasonDataMissing,
			Message: fmt.Sprintf("the volume's data %s is gone", dataPath),
		}}
	}
	return h
}

// fsUsage is a filesystem volume's usage as statfs of the path it is mounted at tells: bytes, and inodes
// when the file system counts them.
func fsUsage(st *unix.Statfs_t) []*csi.VolumeUsage {
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	u := []*csi.VolumeUsage{{
		Unit:      csi.VolumeUsage_BYTES,
		Total:     clampInt64(st.Blocks, unit),
		Available: clampInt64(st.Bavail, unit),
		Used:      clampInt64(st.Blocks-min(st.Bfree, st.Blocks), unit),
	}}
	if st.Files > 0 {
		u = append(u, &csi.VolumeUsage{
			Unit:      csi.VolumeUsage_INODES,
			Total:     clampInt64(st.Files, 1),
			Available: clampInt64(st.Ffree, 1),
			Used:      clampInt64(st.Files-min(st.Ffree, st.Files), 1),
		})
	}
	return u
}

// blockUsage is a block volume's usage: its capacity, with used and available left out as the spec allows.
func blockUsage(capacity int64) []*csi.VolumeUsage {
	return []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: capacity}}
}

// clampInt64 is n*unit, held to the int64 range.
func clampInt64(n, unit uint64) int64 {
	if unit != 0 && n > math.MaxInt64/unit {
		return math.MaxInt64
	}
	return int64(n * unit)
}
