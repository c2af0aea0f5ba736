package csidriver

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	snw  = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	snsw = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	mnmw = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
)

func mountCap(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: m},
	}
}

func blockCap(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: m},
	}
}

// wantCode checks err's gRPC code (codes.OK: no error).
func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: code %v (%v), want %v", what, got, err, want)
	}
}

func TestRequestedAccess(t *testing.T) {
	noType := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw}}
	for _, tc := range []struct {
		name      string
		caps      []*csi.VolumeCapability
		wantBlock bool
		wantCode  codes.Code
	}{
		{name: "mount", caps: []*csi.VolumeCapability{mountCap(snw)}},
		{name: "block", caps: []*csi.VolumeCapability{blockCap(snsw), blockCap(mnmw)}, wantBlock: true},
		{name: "none", wantCode: codes.InvalidArgument},
		{name: "a nil capability", caps: []*csi.VolumeCapability{nil}, wantCode: codes.InvalidArgument},
		{name: "no access type", caps: []*csi.VolumeCapability{noType}, wantCode: codes.InvalidArgument},
		{name: "unknown access mode", caps: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_UNKNOWN)}, wantCode: codes.InvalidArgument},
		{name: "an access mode from the future", caps: []*csi.VolumeCapability{mountCap(99)}, wantCode: codes.InvalidArgument},
		{name: "block and mount", caps: []*csi.VolumeCapability{mountCap(snw), blockCap(snw)}, wantCode: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			block, err := requestedAccess(tc.caps)
			wantCode(t, "requestedAccess", err, tc.wantCode)
			if err == nil && block != tc.wantBlock {
				t.Errorf("requestedAccess = block %v, want %v", block, tc.wantBlock)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	rng := func(req, lim int64) *csi.CapacityRange {
		return &csi.CapacityRange{RequiredBytes: req, LimitBytes: lim}
	}
	for _, tc := range []struct {
		name     string
		r        *csi.CapacityRange
		block    bool
		want     int64
		wantCode codes.Code
	}{
		{name: "no range: the default", want: defaultCapacity},
		{name: "required", r: rng(10<<30, 0), want: 10 << 30},
		{name: "required equals limit", r: rng(5<<20, 5<<20), want: 5 << 20},
		{name: "only a limit below the default", r: rng(0, 1<<20), want: 1 << 20},
		{name: "only a limit above the default", r: rng(0, 4<<30), want: defaultCapacity},
		{name: "filesystem sizes are kept as asked", r: rng(1000, 0), want: 1000},
		{name: "block sizes are whole sectors", r: rng(1000, 0), block: true, want: 1024},
		{name: "block rounding beyond the limit", r: rng(1000, 1000), block: true, wantCode: codes.OutOfRange},
		{name: "block rounding beyond int64", r: rng(math.MaxInt64, 0), block: true, wantCode: codes.OutOfRange},
		{name: "required above the limit", r: rng(2, 1), wantCode: codes.InvalidArgument},
		{name: "negative", r: rng(-1, 0), wantCode: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := capacityFor(tc.r, tc.block)
			wantCode(t, "capacityFor", err, tc.wantCode)
			if err == nil && got != tc.want {
				t.Errorf("capacityFor = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSatisfies(t *testing.T) {
	v := &Volume{ID: "v", CapacityBytes: 10 << 30}
	for _, tc := range []struct {
		name  string
		block bool
		r     *csi.CapacityRange
		want  bool
	}{
		{name: "same request", r: &csi.CapacityRange{RequiredBytes: 10 << 30}, want: true},
		{name: "no range", want: true},
		{name: "less asked", r: &csi.CapacityRange{RequiredBytes: 1 << 30}, want: true},
		{name: "more asked", r: &csi.CapacityRange{RequiredBytes: 20 << 30}},
		{name: "limit below the volume", r: &csi.CapacityRange{LimitBytes: 5 << 30}},
		{name: "other access type", block: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := satisfies(v, tc.block, tc.r); got != tc.want {
				t.Errorf("satisfies = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestExpandedCapacity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		current  int64
		r        *csi.CapacityRange
		block    bool
		want     int64
		wantCode codes.Code
	}{
		{name: "grows", current: 10, r: &csi.CapacityRange{RequiredBytes: 20}, want: 20},
		{name: "only a limit", current: 10, r: &csi.CapacityRange{LimitBytes: 30}, want: 30},
		{name: "does not shrink", current: 10, r: &csi.CapacityRange{RequiredBytes: 5}, want: 10},
		{name: "block grows by whole sectors", current: 512, r: &csi.CapacityRange{RequiredBytes: 600}, block: true, want: 1024},
		{name: "no range", current: 10, wantCode: codes.InvalidArgument},
		{name: "required above the limit", current: 10, r: &csi.CapacityRange{RequiredBytes: 40, LimitBytes: 30}, wantCode: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := expandedCapacity(tc.current, tc.r, tc.block)
			wantCode(t, "expandedCapacity", err, tc.wantCode)
			if err == nil && got != tc.want {
				t.Errorf("expandedCapacity = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestUnsupportedCapability(t *testing.T) {
	fsVol, blockVol := &Volume{ID: "f"}, &Volume{ID: "b", Block: true}
	for _, tc := range []struct {
		name   string
		v      *Volume
		caps   []*csi.VolumeCapability
		wantOK bool
	}{
		{name: "filesystem, mount", v: fsVol, caps: []*csi.VolumeCapability{mountCap(snw), mountCap(mnmw)}, wantOK: true},
		{name: "block, block", v: blockVol, caps: []*csi.VolumeCapability{blockCap(snsw)}, wantOK: true},
		{name: "filesystem, block", v: fsVol, caps: []*csi.VolumeCapability{mountCap(snw), blockCap(snw)}},
		{name: "block, mount", v: blockVol, caps: []*csi.VolumeCapability{mountCap(snw)}},
		{name: "unknown mode", v: fsVol, caps: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_UNKNOWN)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := unsupportedCapability(tc.v, tc.caps); (msg == "") != tc.wantOK {
				t.Errorf("unsupportedCapability = %q, want ok=%v", msg, tc.wantOK)
			}
		})
	}
}

func TestTopologyAllows(t *testing.T) {
	node := map[string]string{TopologyKey: "n1"}
	topo := func(node string) *csi.Topology { return &csi.Topology{Segments: map[string]string{TopologyKey: node}} }
	for _, tc := range []struct {
		name string
		req  *csi.TopologyRequirement
		want bool
	}{
		{name: "no requirement", want: true},
		{name: "requisite is the node", req: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("n2"), topo("n1")}}, want: true},
		{name: "requisite is another node", req: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("n2")}}},
		{name: "requisite names another key", req: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "a"}}}}},
		{name: "only preferred, elsewhere", req: &csi.TopologyRequirement{Preferred: []*csi.Topology{topo("n2")}}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := topologyAllows(tc.req, node); got != tc.want {
				t.Errorf("topologyAllows = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBindMountFlags(t *testing.T) {
	for _, tc := range []struct {
		name        string
		flags       []string
		readOnly    bool
		want        uintptr
		wantIgnored []string
	}{
		{name: "none"},
		{name: "read-only", readOnly: true, want: unix.MS_RDONLY},
		{name: "ro flag", flags: []string{"ro"}, want: unix.MS_RDONLY},
		{name: "honoured", flags: []string{"nosuid", "nodev", "noexec", "noatime"}, want: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME},
		{name: "what a bind mount is anyway", flags: []string{"rw", "bind", "defaults"}},
		{name: "file system options are ignored", flags: []string{"discard", "nouuid", "noexec"}, want: unix.MS_NOEXEC, wantIgnored: []string{"discard", "nouuid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ignored := bindMountFlags(tc.flags, tc.readOnly)
			if got != tc.want || !reflect.DeepEqual(ignored, tc.wantIgnored) {
				t.Errorf("bindMountFlags = %#x, %q; want %#x, %q", got, ignored, tc.want, tc.wantIgnored)
			}
		})
	}
}

func TestRemountFlags(t *testing.T) {
	const base = unix.MS_BIND | unix.MS_REMOUNT
	for _, tc := range []struct {
		name string
		have int64
		want uintptr
		out  uintptr
	}{
		{name: "read-only on a plain mount", want: unix.MS_RDONLY, out: base | unix.MS_RDONLY},
		{name: "the mount's locked flags are kept", have: unix.ST_NOSUID | unix.ST_NODEV | unix.ST_RELATIME, want: unix.MS_RDONLY,
			out: base | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_RELATIME},
		{name: "an atime flag asked replaces the mount's", have: unix.ST_RELATIME | unix.ST_NOEXEC, want: unix.MS_NOATIME,
			out: base | unix.MS_NOATIME | unix.MS_NOEXEC},
		{name: "the read-only flag is not kept", have: unix.ST_RDONLY, want: unix.MS_NOSUID, out: base | unix.MS_NOSUID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := remountFlags(tc.have, tc.want); got != tc.out {
				t.Errorf("remountFlags = %#x, want %#x", got, tc.out)
			}
		})
	}
}

func TestCheckPublish(t *testing.T) {
	rw := Publication{AccessMode: snw.String()}
	ro := Publication{AccessMode: snw.String(), ReadOnly: true}
	single := Publication{AccessMode: snsw.String()}
	for _, tc := range []struct {
		name      string
		published map[string]Publication
		want      Publication
		wantDone  bool
		wantCode  codes.Code
	}{
		{name: "first publication", want: rw},
		{name: "repeat", published: map[string]Publication{"/t": rw}, want: rw, wantDone: true},
		{name: "same target, other parameters", published: map[string]Publication{"/t": rw}, want: ro, wantCode: codes.AlreadyExists},
		{name: "same target, other mount flags", published: map[string]Publication{"/t": rw},
			want: Publication{AccessMode: snw.String(), MountFlags: []string{"noexec"}}, wantCode: codes.AlreadyExists},
		{name: "single node writer at a second target (a second pod)", published: map[string]Publication{"/o": rw}, want: rw},
		{name: "single writer at a second target", published: map[string]Publication{"/o": single}, want: single, wantCode: codes.FailedPrecondition},
		{name: "single writer where another target is published", published: map[string]Publication{"/o": rw}, want: single, wantCode: codes.FailedPrecondition},
		{name: "a second target beside a single writer", published: map[string]Publication{"/o": single}, want: rw, wantCode: codes.FailedPrecondition},
		{name: "single writer repeat", published: map[string]Publication{"/t": single}, want: single, wantDone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, err := checkPublish(tc.published, "/t", tc.want)
			wantCode(t, "checkPublish", err, tc.wantCode)
			if done != tc.wantDone {
				t.Errorf("checkPublish = done %v, want %v", done, tc.wantDone)
			}
		})
	}
}

func TestVolumeHealth(t *testing.T) {
	for _, tc := range []struct {
		name       string
		present    bool
		checkErr   error
		wantReason string
	}{
		{name: "healthy", present: true},
		{name: "data gone", wantReason: reasonDataMissing},
		{name: "check failed", checkErr: errors.New("not a directory"), wantReason: reasonDataUnreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := volumeHealth("v", "/state/v", tc.present, tc.checkErr)
			if h.GetVolumeId() != "v" {
				t.Errorf("volume ID %q, want v", h.GetVolumeId())
			}
			st := h.GetHealthStatuses()
			switch {
			case tc.wantReason == "" && len(st) != 0:
				t.Errorf("health %v, want healthy", st)
			case tc.wantReason != "" && (len(st) != 1 || st[0].GetReason() != tc.wantReason ||
				st[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE || st[0].GetMessage() == ""):
				t.Errorf("health %v, want one INACCESSIBLE %s with a message", st, tc.wantReason)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	st := &unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: 1000, Bfree: 400, Bavail: 300, Files: 500, Ffree: 100}
	want := []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: 1000 * 4096, Available: 300 * 4096, Used: 600 * 4096},
		{Unit: csi.VolumeUsage_INODES, Total: 500, Available: 100, Used: 400},
	}
	if got := fsUsage(st); !equalUsage(got, want) {
		t.Errorf("fsUsage = %v, want %v", got, want)
	}
	// A file system that counts no inodes reports bytes only; a huge one is held to int64.
	st = &unix.Statfs_t{Bsize: 1 << 20, Blocks: math.MaxUint64 / 2, Bfree: 0, Bavail: 0}
	got := fsUsage(st)
	if len(got) != 1 || got[0].GetTotal() != math.MaxInt64 {
		t.Errorf("fsUsage of a huge file system without inodes = %v", got)
	}
	if got := blockUsage(10 << 30); len(got) != 1 || got[0].GetTotal() != 10<<30 || got[0].GetUnit() != csi.VolumeUsage_BYTES {
		t.Errorf("blockUsage = %v", got)
	}
}

func equalUsage(a, b []*csi.VolumeUsage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
