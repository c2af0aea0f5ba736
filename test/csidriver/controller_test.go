package csidriver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// The controller service and the node's read-only calls touch only the state directory: these tests run
// anywhere, without root.

func newTestDriver(t *testing.T, stateDir string) *Driver {
	t.Helper()
	d, err := New(Config{NodeID: "n1", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func createReq(name string, size int64, c *csi.VolumeCapability) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{c}}
}

func TestCreateDeleteVolume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := newTestDriver(t, dir)

	resp, err := d.CreateVolume(ctx, createReq("fs", 1<<20, mountCap(snw)))
	if err != nil {
		t.Fatal(err)
	}
	v := resp.GetVolume()
	if v.GetVolumeId() != "fs" || v.GetCapacityBytes() != 1<<20 || v.GetAccessibleTopology()[0].GetSegments()[TopologyKey] != "n1" {
		t.Errorf("CreateVolume = %v", v)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "fs")); err != nil || !fi.IsDir() {
		t.Errorf("volume directory: %v, %v", fi, err)
	}
	_, err = d.CreateVolume(ctx, createReq("fs", 1<<20, mountCap(snw)))
	wantCode(t, "the same CreateVolume again", err, codes.OK)
	_, err = d.CreateVolume(ctx, createReq("fs", 2<<20, mountCap(snw)))
	wantCode(t, "CreateVolume of the name, larger", err, codes.AlreadyExists)
	_, err = d.CreateVolume(ctx, createReq("fs", 1<<20, blockCap(snw)))
	wantCode(t, "CreateVolume of the name, block", err, codes.AlreadyExists)

	// A block volume is a sparse image of its capacity.
	if _, err := d.CreateVolume(ctx, createReq("blk", 1<<30, blockCap(snw))); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "blk.img"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 1<<30 || st.Blocks*512 >= 1<<30 {
		t.Errorf("image: size %d, %d bytes allocated; want 1 GiB, sparse", st.Size, st.Blocks*512)
	}

	for _, tc := range []struct {
		name string
		req  *csi.CreateVolumeRequest
		want codes.Code
	}{
		{name: "a name with a slash", req: createReq("a/b", 1, mountCap(snw)), want: codes.InvalidArgument},
		{name: "a name the driver keeps", req: createReq("x.json", 1, mountCap(snw)), want: codes.InvalidArgument},
		{name: "a content source", req: &csi.CreateVolumeRequest{Name: "c", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
			VolumeContentSource: &csi.VolumeContentSource{}}, want: codes.InvalidArgument},
		{name: "another node's topology", req: &csi.CreateVolumeRequest{Name: "c", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{TopologyKey: "n2"}}}}},
			want: codes.ResourceExhausted},
	} {
		_, err := d.CreateVolume(ctx, tc.req)
		wantCode(t, tc.name, err, tc.want)
	}

	for _, id := range []string{"fs", "blk"} {
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Errorf("second DeleteVolume of %s: %v", id, err)
		}
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("state directory after the deletes: %v", left)
	}
	_, err = d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: ".."})
	wantCode(t, "DeleteVolume of ..", err, codes.InvalidArgument)
}

func TestDeleteVolumeKeepsWhatIsOutside(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "precious"), "x")
	// A symbolic link where a volume's directory belongs is never followed.
	symlink(t, outside, filepath.Join(dir, "v"))
	d := newTestDriver(t, dir)
	_, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "v"})
	wantCode(t, "DeleteVolume of a symbolic link", err, codes.Internal)
	if _, err := os.Stat(filepath.Join(outside, "precious")); err != nil {
		t.Errorf("the link's target was touched: %v", err)
	}
}

func TestExpandAndRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := newTestDriver(t, dir)
	for _, req := range []*csi.CreateVolumeRequest{createReq("fs", 1<<20, mountCap(snw)), createReq("blk", 1<<20, blockCap(snw))} {
		if _, err := d.CreateVolume(ctx, req); err != nil {
			t.Fatal(err)
		}
		resp, err := d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: req.GetName(),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 3 << 20}})
		if err != nil || resp.GetCapacityBytes() != 3<<20 || !resp.GetNodeExpansionRequired() {
			t.Errorf("ControllerExpandVolume(%s) = %v, %v", req.GetName(), resp, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "blk.img")); err != nil || fi.Size() != 3<<20 {
		t.Errorf("the image did not grow: %v, %v", fi, err)
	}
	_, err := d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "nope", CapacityRange: &csi.CapacityRange{RequiredBytes: 1}})
	wantCode(t, "ControllerExpandVolume of a volume unknown", err, codes.NotFound)

	// A restarted driver knows the capacity and the access type.
	d = newTestDriver(t, dir)
	resp, err := d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "fs",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20}})
	if err != nil || resp.GetCapacityBytes() != 3<<20 {
		t.Errorf("ControllerExpandVolume smaller, after a restart = %v, %v; want 3 MiB", resp, err)
	}
	_, err = d.CreateVolume(ctx, createReq("fs", 3<<20, mountCap(snw)))
	wantCode(t, "CreateVolume of the expanded size, after a restart", err, codes.OK)
	val, err := d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "blk",
		VolumeCapabilities: []*csi.VolumeCapability{blockCap(snsw)}})
	if err != nil || val.GetConfirmed() == nil {
		t.Errorf("ValidateVolumeCapabilities(block) = %v, %v", val, err)
	}
	val, err = d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "blk",
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}})
	if err != nil || val.GetConfirmed() != nil || val.GetMessage() == "" {
		t.Errorf("ValidateVolumeCapabilities(mount) of a block volume = %v, %v; want unconfirmed", val, err)
	}
}

func TestNodeReadsWithoutMounts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := newTestDriver(t, dir)
	if _, err := d.CreateVolume(ctx, createReq("fs", 1<<20, mountCap(snw))); err != nil {
		t.Fatal(err)
	}

	health := func() []*csi.VolumeHealth_VolumeHealthEntry {
		t.Helper()
		resp, err := d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "fs"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetVolumeHealth().GetHealthStatuses()
	}
	if h := health(); len(h) != 0 {
		t.Errorf("health of a new volume = %v, want healthy", h)
	}
	if err := os.Remove(filepath.Join(dir, "fs")); err != nil {
		t.Fatal(err)
	}
	if h := health(); len(h) != 1 || h[0].GetReason() != reasonDataMissing {
		t.Errorf("health of a volume whose directory is gone = %v, want %s", h, reasonDataMissing)
	}
	_, err := d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "nope"})
	wantCode(t, "NodeGetVolumeHealth of a volume unknown", err, codes.NotFound)

	_, err = d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "fs", VolumePath: dir})
	wantCode(t, "NodeGetVolumeStats at a path where the volume is not", err, codes.NotFound)
	_, err = d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "fs", VolumePath: "/nonexistent"})
	wantCode(t, "NodeExpandVolume at a path that does not exist", err, codes.NotFound)
	_, err = d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "fs", VolumePath: dir,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20}})
	wantCode(t, "NodeExpandVolume beyond the controller's expansion", err, codes.OutOfRange)
	resp, err := d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "fs", VolumePath: dir,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}})
	if err != nil || resp.GetCapacityBytes() != 1<<20 {
		t.Errorf("NodeExpandVolume = %v, %v; want 1 MiB", resp, err)
	}

	// Calls that find nothing to undo succeed.
	if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "nope", TargetPath: filepath.Join(dir, "t")}); err != nil {
		t.Errorf("NodeUnpublishVolume of nothing: %v", err)
	}
	if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "fs", StagingTargetPath: filepath.Join(dir, "s")}); err != nil {
		t.Errorf("NodeUnstageVolume of a volume not staged: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fs.json")); err != nil {
		t.Errorf("the record: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nope.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a record was made for a volume unknown: %v", err)
	}
}
