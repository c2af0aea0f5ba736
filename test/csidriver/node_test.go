package csidriver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What csi-sanity does not cover: static provisioning, inline ephemeral volumes, read-only publications,
// a volume whose data went away, block expansion on a staged loop device, and a driver restarted between
// stage and unstage. These mount and attach loop devices: root only.

func TestNodeStaticVolumeReadOnly(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	dir := hostTempDir(t)
	d := newTestDriver(t, filepath.Join(dir, "state"))
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "pod", "mount")

	// A volume ID never created gets its directory on its first stage.
	stage := &csi.NodeStageVolumeRequest{VolumeId: "static-1", StagingTargetPath: staging, VolumeCapability: mountCap(snw)}
	for range 2 {
		if _, err := d.NodeStageVolume(ctx, stage); err != nil {
			t.Fatal(err)
		}
	}
	if same, err := mountedFrom(staging, filepath.Join(dir, "state", "static-1")); err != nil || !same {
		t.Fatalf("staging path is not the volume's directory: %v, %v", same, err)
	}
	writeFile(t, filepath.Join(staging, "data"), "hello")

	publish := &csi.NodePublishVolumeRequest{VolumeId: "static-1", StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: mountCap(snw), Readonly: true}
	for range 2 {
		if _, err := d.NodePublishVolume(ctx, publish); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(target, "data")); err != nil || string(b) != "hello" {
		t.Errorf("read through the publication: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(target, "other"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		t.Errorf("write to a read-only publication: %v, want EROFS", err)
	}
	publish.Readonly = false
	_, err := d.NodePublishVolume(ctx, publish)
	wantCode(t, "NodePublishVolume of the target, read-write", err, codes.AlreadyExists)

	stats, err := d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "static-1", VolumePath: target})
	if err != nil || len(stats.GetUsage()) == 0 || stats.GetUsage()[0].GetTotal() <= 0 {
		t.Errorf("NodeGetVolumeStats = %v, %v", stats, err)
	}

	for range 2 {
		if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "static-1", TargetPath: target}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "static-1", StagingTargetPath: staging}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target after unpublish: %v, want gone", err)
	}
	if m, _ := isMountPoint(staging); m {
		t.Error("staging path is still mounted after unstage")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "state", "static-1", "data")); err != nil || string(b) != "hello" {
		t.Errorf("the volume's data after unstage: %q, %v", b, err)
	}
}

func TestNodeEphemeralVolume(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	dir := hostTempDir(t)
	d := newTestDriver(t, filepath.Join(dir, "state"))
	target := filepath.Join(dir, "pod", "mount")
	data := filepath.Join(dir, "state", "csi-inline")

	publish := &csi.NodePublishVolumeRequest{VolumeId: "csi-inline", TargetPath: target, VolumeCapability: mountCap(snw),
		VolumeContext: map[string]string{EphemeralContextKey: "true"}}
	for range 2 {
		if _, err := d.NodePublishVolume(ctx, publish); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(target, "scratch"), "x")
	if _, err := os.Stat(filepath.Join(data, "scratch")); err != nil {
		t.Errorf("the ephemeral volume's directory does not hold what the pod wrote: %v", err)
	}
	// Without the ephemeral flag, a publish without staging is refused.
	_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "other", TargetPath: target + "2", VolumeCapability: mountCap(snw)})
	wantCode(t, "NodePublishVolume without a staging path", err, codes.FailedPrecondition)

	if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-inline", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{target, data, data + recordSuffix} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the last unpublish: %v, want gone", p, err)
		}
	}
}

// TestNodeDataGoneAndRestart removes a published volume's directory under a running pod, then restarts the
// driver: health says INACCESSIBLE, and the restarted driver still unpublishes and unstages from its records.
func TestNodeDataGoneAndRestart(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	dir := hostTempDir(t)
	state := filepath.Join(dir, "state")
	d := newTestDriver(t, state)
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "pod", "mount")
	if _, err := d.CreateVolume(ctx, createReq("vol", 1<<20, mountCap(snw))); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol", StagingTargetPath: staging, VolumeCapability: mountCap(snw)}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol", StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: mountCap(snw)}); err != nil {
		t.Fatal(err)
	}
	_, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol"})
	wantCode(t, "DeleteVolume of a published volume", err, codes.FailedPrecondition)

	if err := os.RemoveAll(filepath.Join(state, "vol")); err != nil {
		t.Fatal(err)
	}
	d = newTestDriver(t, state) // restarted
	h, err := d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "vol", VolumePublishPath: target})
	if st := h.GetVolumeHealth().GetHealthStatuses(); err != nil || len(st) != 1 || st[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE {
		t.Errorf("health of a volume whose directory is gone = %v, %v; want INACCESSIBLE", h, err)
	}
	if _, err := d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol", VolumePath: target}); err != nil {
		t.Errorf("NodeGetVolumeStats after a restart: %v", err)
	}
	if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol", StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if m, _ := isMountPoint(staging); m {
		t.Error("staging path is still mounted after unstage by the restarted driver")
	}
	if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol"}); err != nil {
		t.Errorf("DeleteVolume: %v", err)
	}
}

func TestNodeBlockVolume(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	dir := hostTempDir(t)
	state := filepath.Join(dir, "state")
	d := newTestDriver(t, state)
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "pod", "dev")
	if _, err := d.CreateVolume(ctx, createReq("blk", 1<<20, blockCap(snw))); err != nil {
		t.Fatal(err)
	}
	stage := &csi.NodeStageVolumeRequest{VolumeId: "blk", StagingTargetPath: staging, VolumeCapability: blockCap(snw)}
	for range 2 {
		if _, err := d.NodeStageVolume(ctx, stage); err != nil {
			t.Fatal(err)
		}
	}
	v, err := d.store.load("blk")
	if err != nil || !strings.HasPrefix(v.LoopDevice, "/dev/loop") {
		t.Fatalf("record after stage: %+v, %v", v, err)
	}
	dev := v.LoopDevice
	publish := &csi.NodePublishVolumeRequest{VolumeId: "blk", StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap(snw)}
	for range 2 {
		if _, err := d.NodePublishVolume(ctx, publish); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
		t.Errorf("target %s is not a block device: %v, %v", target, fi, err)
	}
	if got := loopSize(t, dev); got != 1<<20 {
		t.Errorf("loop device size %d, want 1 MiB", got)
	}

	// Online expansion: the controller grows the image, the node tells the loop device.
	if _, err := d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "blk", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20}}); err != nil {
		t.Fatal(err)
	}
	resp, err := d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "blk", VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20}})
	if err != nil || resp.GetCapacityBytes() != 2<<20 {
		t.Errorf("NodeExpandVolume = %v, %v", resp, err)
	}
	if got := loopSize(t, dev); got != 2<<20 {
		t.Errorf("loop device size after expansion %d, want 2 MiB", got)
	}
	stats, err := d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "blk", VolumePath: target})
	if err != nil || stats.GetUsage()[0].GetTotal() != 2<<20 {
		t.Errorf("NodeGetVolumeStats = %v, %v", stats, err)
	}

	// A restarted driver finds its loop device in the record.
	d = newTestDriver(t, state)
	if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "blk", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "blk", StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if backs, err := loopBacks(dev, filepath.Join(state, "blk.img")); err != nil || backs {
		t.Errorf("%s still backs the image after unstage: %v, %v", dev, backs, err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target after unpublish: %v, want gone", err)
	}
	if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "blk"}); err != nil {
		t.Errorf("DeleteVolume: %v", err)
	}
}

// loopSize is the size in bytes the kernel gives the block device dev.
func loopSize(t *testing.T, dev string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/block", filepath.Base(dev), "size"))
	if err != nil {
		t.Fatal(err)
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return sectors * 512
}

// A volume whose attributes ask for it fails its publication with the given message, and mounts nothing.
func TestNodePublishFaultInjection(t *testing.T) {
	dir := t.TempDir()
	d := newTestDriver(t, filepath.Join(dir, "state"))
	_, err := d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: filepath.Join(dir, "s"),
		TargetPath: filepath.Join(dir, "t"), VolumeCapability: mountCap(snw), VolumeContext: map[string]string{FailPublishKey: "disk on fire"}})
	if err == nil || !strings.Contains(err.Error(), "code = Internal desc = disk on fire") {
		t.Errorf("NodePublishVolume = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "t")); !os.IsNotExist(err) {
		t.Errorf("a failed publication made its target: %v", err)
	}
}

// A volume whose attributes ask for it hangs its publication until the named file is in the state directory
// or the call's deadline passes (DeadlineExceeded); a name that is not a plain file name is refused.
func TestNodePublishHangs(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	d := newTestDriver(t, state)
	req := func(release string) *csi.NodePublishVolumeRequest {
		return &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: filepath.Join(dir, "s"), TargetPath: filepath.Join(dir, "t"),
			VolumeCapability: mountCap(snw), VolumeContext: map[string]string{HangPublishKey: release}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := d.NodePublishVolume(ctx, req("go")); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a hung publication: %v, want DeadlineExceeded", err)
	}
	if _, err := d.NodePublishVolume(context.Background(), req("../go")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a release file outside the state directory: %v, want InvalidArgument", err)
	}
	if err := os.WriteFile(filepath.Join(state, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	// Released: the publication goes on (and fails here only because the volume was never staged).
	if _, err := d.NodePublishVolume(ctx2, req("go")); status.Code(err) == codes.DeadlineExceeded {
		t.Errorf("a released publication still hangs: %v", err)
	}
}
