package volume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/csi"
	"github.com/nodeagent/kubelet/pkg/csi/csinames"
)

// fakeCSINode is a driver's node service that "mounts" through the fixture's fake mounter and records the
// calls it gets.
type fakeCSINode struct {
	csispec.NodeClient
	mnt   *fakeMounter
	mu    sync.Mutex
	calls []string
	last  map[string]any // the last request of each method
	fail  error
	// hang, when set, holds NodePublishVolume until the call's deadline, as a hung driver does.
	hang bool
}

func (n *fakeCSINode) record(call string, req any) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, call)
	if n.last == nil {
		n.last = map[string]any{}
	}
	n.last[strings.Fields(call)[0]] = req
	return n.fail
}

func (n *fakeCSINode) NodeStageVolume(_ context.Context, r *csispec.NodeStageVolumeRequest, _ ...grpc.CallOption) (*csispec.NodeStageVolumeResponse, error) {
	if err := n.record("stage "+r.VolumeId, r); err != nil {
		return nil, err
	}
	_ = n.mnt.Bind("/dev/fake", r.StagingTargetPath, false)
	return &csispec.NodeStageVolumeResponse{}, nil
}

func (n *fakeCSINode) NodeUnstageVolume(_ context.Context, r *csispec.NodeUnstageVolumeRequest, _ ...grpc.CallOption) (*csispec.NodeUnstageVolumeResponse, error) {
	if err := n.record("unstage "+r.VolumeId, r); err != nil {
		return nil, err
	}
	_ = n.mnt.Unmount(r.StagingTargetPath)
	return &csispec.NodeUnstageVolumeResponse{}, nil
}

func (n *fakeCSINode) NodePublishVolume(ctx context.Context, r *csispec.NodePublishVolumeRequest, _ ...grpc.CallOption) (*csispec.NodePublishVolumeResponse, error) {
	if err := n.record("publish "+r.VolumeId, r); err != nil {
		return nil, err
	}
	if n.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	_ = n.mnt.Bind(r.StagingTargetPath, r.TargetPath, r.Readonly)
	return &csispec.NodePublishVolumeResponse{}, nil
}

func (n *fakeCSINode) NodeUnpublishVolume(_ context.Context, r *csispec.NodeUnpublishVolumeRequest, _ ...grpc.CallOption) (*csispec.NodeUnpublishVolumeResponse, error) {
	if err := n.record("unpublish "+r.VolumeId, r); err != nil {
		return nil, err
	}
	_ = n.mnt.Unmount(r.TargetPath)
	return &csispec.NodeUnpublishVolumeResponse{}, nil
}

func (n *fakeCSINode) NodeGetVolumeStats(_ context.Context, r *csispec.NodeGetVolumeStatsRequest, _ ...grpc.CallOption) (*csispec.NodeGetVolumeStatsResponse, error) {
	if err := n.record("stats "+r.VolumeId, r); err != nil {
		return nil, err
	}
	return &csispec.NodeGetVolumeStatsResponse{Usage: []*csispec.VolumeUsage{
		{Unit: csispec.VolumeUsage_BYTES, Total: 100, Used: 30, Available: 70},
		{Unit: csispec.VolumeUsage_INODES, Total: 10, Used: 1, Available: 9}}}, nil
}

func (n *fakeCSINode) NodeExpandVolume(_ context.Context, r *csispec.NodeExpandVolumeRequest, _ ...grpc.CallOption) (*csispec.NodeExpandVolumeResponse, error) {
	if err := n.record(fmt.Sprintf("expand %s %d", r.VolumeId, r.CapacityRange.GetRequiredBytes()), r); err != nil {
		return nil, err
	}
	return &csispec.NodeExpandVolumeResponse{CapacityBytes: r.CapacityRange.GetRequiredBytes()}, nil
}

// fakeClaimStatus records the status patches of claims.
type fakeClaimStatus struct {
	patches []string
}

func (f *fakeClaimStatus) PatchClaimStatus(_ context.Context, ns, name string, patch []byte) error {
	f.patches = append(f.patches, ns+"/"+name+" "+string(patch))
	return nil
}

func (n *fakeCSINode) takeCalls() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := strings.Join(n.calls, ", ")
	n.calls = nil
	return c
}

// fakeCSI is the registered drivers and the storage objects.
type fakeCSI struct {
	mu          sync.Mutex
	drivers     map[string]*csi.Driver
	objects     map[string]*storagev1.CSIDriver
	attachments map[string]*storagev1.VolumeAttachment
	apiErr      error // every read of the API fails with it (the API server away)
}

func (f *fakeCSI) Driver(name string) (*csi.Driver, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.drivers[name]; ok {
		return d, nil
	}
	return nil, &csi.NotRegisteredError{Name: name}
}

func (f *fakeCSI) CSIDriver(_ context.Context, name string) (*storagev1.CSIDriver, error) {
	if d, ok := f.objects[name]; ok {
		return d, nil
	}
	return nil, notFound("csidrivers", name)
}

func (f *fakeCSI) VolumeAttachment(_ context.Context, name string) (*storagev1.VolumeAttachment, error) {
	if f.apiErr != nil {
		return nil, f.apiErr
	}
	if a, ok := f.attachments[name]; ok {
		return a, nil
	}
	return nil, notFound("volumeattachments", name)
}

type csiFixture struct {
	*fixture
	csi  *fakeCSI
	node *fakeCSINode
}

func newCSIFixture(t *testing.T) *csiFixture {
	f := newFixture(t)
	node := &fakeCSINode{mnt: f.mnt}
	c := &fakeCSI{drivers: map[string]*csi.Driver{"hostpath.csi": {Name: "hostpath.csi", Node: node, StageUnstage: true}},
		objects: map[string]*storagev1.CSIDriver{"hostpath.csi": {Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}}}},
		attachments: map[string]*storagev1.VolumeAttachment{}}
	f.m.cfg.CSI, f.m.cfg.CSIAPI = c, c
	return &csiFixture{fixture: f, csi: c, node: node}
}

// claimPod is a pod (by uid) using claim "data", bound to the csi volume pv-1 with the given handle.
func (f *csiFixture) claimPod(uid, handle string) *v1.Pod {
	f.api.claims["data"] = &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns"},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	f.api.pvs["pv-1"] = &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: v1.PersistentVolumeSpec{
		AccessModes:  []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		MountOptions: []string{"noatime"},
		ClaimRef:     &v1.ObjectReference{Namespace: "ns", Name: "data"},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi", VolumeHandle: handle,
			FSType: "ext4", VolumeAttributes: map[string]string{"size": "1Gi"}}}}}
	p := podWith(v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
	p.UID = types.UID(uid)
	return p
}

func TestCSIStagePublishShareAndTearDown(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	a, b := f.claimPod("uid-a", "vol-1"), f.claimPod("uid-b", "vol-1")
	got, err := f.m.MountPod(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(f.root, "pods", "uid-a", "volumes", pluginCSI, "pv-1", "mount")
	if got["vol"].Path != target {
		t.Errorf("mounted at %s, want %s", got["vol"].Path, target)
	}
	if c := f.node.takeCalls(); c != "stage vol-1, publish vol-1" {
		t.Errorf("calls %q", c)
	}
	if c := got["vol"].Calls; len(c) != 2 || c[0].Name != "NodeStageVolume" || c[1].Name != "NodePublishVolume" || c[1].Start.Before(c[0].Start) {
		t.Errorf("the timed calls %+v, want the stage then the publish", c)
	}
	if got := f.m.VolumesInUse(); len(got) != 0 {
		t.Errorf("a volume of a driver that does not attach is listed in use: %v", got)
	}
	stage := f.node.last["stage"].(*csispec.NodeStageVolumeRequest)
	staging := filepath.Join(f.root, "plugins", "kubernetes.io", "csi", "hostpath.csi", handleDir("vol-1"), "globalmount")
	if stage.StagingTargetPath != staging || stage.VolumeCapability.GetMount().FsType != "ext4" ||
		strings.Join(stage.VolumeCapability.GetMount().MountFlags, ",") != "noatime" ||
		stage.VolumeCapability.AccessMode.Mode != csispec.VolumeCapability_AccessMode_SINGLE_NODE_WRITER || stage.VolumeContext["size"] != "1Gi" {
		t.Errorf("stage request %+v", stage)
	}
	pub := f.node.last["publish"].(*csispec.NodePublishVolumeRequest)
	if pub.StagingTargetPath != staging || pub.TargetPath != target || pub.Readonly {
		t.Errorf("publish request %+v", pub)
	}
	var data map[string]string
	raw, _ := os.ReadFile(filepath.Join(filepath.Dir(target), volDataFile))
	if err := json.Unmarshal(raw, &data); err != nil || data["driverName"] != "hostpath.csi" || data["volumeHandle"] != "vol-1" ||
		data["specVolID"] != "pv-1" || data["volumeLifecycleMode"] != "Persistent" || data["nodeName"] != "node1" {
		t.Errorf("vol_data.json %s (%v)", raw, err)
	}

	// Synced again: used as it is. A second pod: published again, the staging kept.
	if _, err := f.m.MountPod(ctx, a); err != nil {
		t.Fatal(err)
	}
	if c := f.node.takeCalls(); c != "" {
		t.Errorf("a sync of a published volume called the driver: %q", c)
	}
	if _, err := f.m.MountPod(ctx, b); err != nil {
		t.Fatal(err)
	}
	f.node.takeCalls()
	if err := f.m.UnmountPod(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if c := f.node.takeCalls(); c != "unpublish vol-1" {
		t.Errorf("first pod gone: calls %q, want only its unpublish", c)
	}
	if err := f.m.UnmountPod(ctx, "uid-b"); err != nil {
		t.Fatal(err)
	}
	if c := f.node.takeCalls(); c != "unpublish vol-1, unstage vol-1" {
		t.Errorf("last pod gone: calls %q", c)
	}
	if _, err := os.Stat(filepath.Dir(staging)); !os.IsNotExist(err) {
		t.Errorf("the global directory is left: %v", err)
	}
}

func TestCSIDriverNotRegistered(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	p := f.claimPod("uid-a", "vol-1")
	if _, err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	f.node.takeCalls()
	drv := f.csi.drivers["hostpath.csi"]
	delete(f.csi.drivers, "hostpath.csi")
	want := "driver name hostpath.csi not found in the list of registered CSI drivers"
	// The teardown waits for the driver: nothing is unmounted behind its back.
	if err := f.m.UnmountPod(ctx, "uid-a"); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("teardown without the driver: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "pods", "uid-a", "volumes", pluginCSI, "pv-1", volDataFile)); err != nil {
		t.Errorf("the volume's record is gone before its driver unpublished it: %v", err)
	}
	f.csi.drivers["hostpath.csi"] = drv
	if err := f.m.UnmountPod(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if c := f.node.takeCalls(); c != "unpublish vol-1, unstage vol-1" {
		t.Errorf("calls %q", c)
	}
	delete(f.csi.drivers, "hostpath.csi")
	_, err := f.m.MountPod(ctx, f.claimPod("uid-c", "vol-1"))
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `MountVolume.SetUp failed for volume "vol"`) {
		t.Errorf("mount without the driver: %v", err)
	}
}

func TestCSIAttachRequired(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	f.csi.objects["hostpath.csi"].Spec.AttachRequired = ptr.To(true)
	p := f.claimPod("uid-a", "vol-1")
	name := csinames.AttachmentName("vol-1", "hostpath.csi", "node1")
	if _, err := f.m.MountPod(ctx, p); err == nil || !strings.Contains(err.Error(), "waiting for VolumeAttachment "+name) {
		t.Fatalf("no attachment: %v", err)
	}
	f.csi.attachments[name] = &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{Attached: false,
		AttachError: &storagev1.VolumeError{Message: "disk busy"}}}
	if _, err := f.m.MountPod(ctx, p); err == nil || !strings.Contains(err.Error(), "disk busy") {
		t.Fatalf("attachment failed: %v", err)
	}
	if c := f.node.takeCalls(); c != "" {
		t.Errorf("the driver was called before the volume was attached: %q", c)
	}
	f.csi.attachments[name].Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"lun": "3"}}
	// The API server away meanwhile: the pod waits, saying why, and the driver is not called on a guess.
	f.csi.apiErr = errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	if _, err := f.m.MountPod(ctx, p); err == nil || !strings.Contains(err.Error(), "get VolumeAttachment "+name) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("attachment unreadable: %v", err)
	}
	if c := f.node.takeCalls(); c != "" {
		t.Errorf("the driver was called while the attachment could not be read: %q", c)
	}
	f.csi.apiErr = nil
	if _, err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if pub := f.node.last["publish"].(*csispec.NodePublishVolumeRequest); pub.PublishContext["lun"] != "3" {
		t.Errorf("publish context %v, want the attachment's metadata", pub.PublishContext)
	}
	if got := fmt.Sprint(f.m.VolumesInUse()); got != "[kubernetes.io/csi/hostpath.csi^vol-1]" {
		t.Errorf("volumes in use %s", got)
	}
	if err := f.m.UnmountPod(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if got := f.m.VolumesInUse(); len(got) != 0 {
		t.Errorf("volumes in use after the teardown: %v", got)
	}
}

func TestCSIInlineVolume(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	f.csi.objects["hostpath.csi"].Spec.PodInfoOnMount = ptr.To(true)
	p := podWith(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "hostpath.csi",
		ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{"k": "v"}}}})
	p.Spec.ServiceAccountName = "sa"
	got, err := f.m.MountPod(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !got["scratch"].ReadOnly {
		t.Error("a readOnly inline volume is mounted read-write")
	}
	handle := inlineHandle("uid-1", "scratch")
	if c := f.node.takeCalls(); c != "publish "+handle {
		t.Errorf("calls %q, want a publish without stage", c)
	}
	pub := f.node.last["publish"].(*csispec.NodePublishVolumeRequest)
	want := map[string]string{"k": "v", "csi.storage.k8s.io/pod.name": "web", "csi.storage.k8s.io/pod.namespace": "ns",
		"csi.storage.k8s.io/pod.uid": "uid-1", "csi.storage.k8s.io/serviceAccount.name": "sa", "csi.storage.k8s.io/ephemeral": "true"}
	if fmt.Sprint(pub.VolumeContext) != fmt.Sprint(want) || !pub.Readonly {
		t.Errorf("publish request %+v", pub)
	}
	if err := f.m.UnmountPod(ctx, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if c := f.node.takeCalls(); c != "unpublish "+handle {
		t.Errorf("teardown calls %q", c)
	}

	// A driver whose CSIDriver does not list Ephemeral refuses inline volumes.
	f.csi.objects["hostpath.csi"].Spec.VolumeLifecycleModes = nil
	if _, err := f.m.MountPod(ctx, p); err == nil || !strings.Contains(err.Error(), `volume mode "Ephemeral" not supported by driver hostpath.csi`) {
		t.Errorf("inline volume of a persistent-only driver: %v", err)
	}
}

func TestCSIBadInput(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	// A handle with "/" and "..": hashed into the global path, never joined.
	p := f.claimPod("uid-a", "../../../etc")
	if _, err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	stage := f.node.last["stage"].(*csispec.NodeStageVolumeRequest)
	if !strings.HasPrefix(stage.StagingTargetPath, filepath.Join(f.root, "plugins", "kubernetes.io", "csi", "hostpath.csi")+"/") ||
		strings.Contains(stage.StagingTargetPath, "..") {
		t.Errorf("staging path %s", stage.StagingTargetPath)
	}
	// A driver name that is not a DNS subdomain is refused before any path is made of it.
	bad := f.claimPod("uid-b", "x")
	f.api.pvs["pv-1"].Spec.CSI.Driver = "../evil"
	if _, err := f.m.MountPod(ctx, bad); err == nil || !strings.Contains(err.Error(), "not a DNS subdomain") {
		t.Errorf("bad driver name: %v", err)
	}
	f.api.pvs["pv-1"].Spec.CSI.Driver = "hostpath.csi"
	// A record that does not parse: the teardown goes on (the generic unmount takes the mount) and says why.
	rec := filepath.Join(f.root, "pods", "uid-a", "volumes", pluginCSI, "pv-1", volDataFile)
	if err := os.WriteFile(rec, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.node.takeCalls()
	if err := f.m.UnmountPod(ctx, "uid-a"); err != nil {
		t.Errorf("teardown with a damaged record: %v", err)
	}
	if c := f.node.takeCalls(); c != "" {
		t.Errorf("the driver was called for a volume whose record does not parse: %q", c)
	}
}

func TestGenericEphemeralVolume(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	p := podWith(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	f.claimPod("uid-1", "eph-1")
	claim := f.api.claims["data"]
	claim.Name = "web-scratch"
	f.api.claims["web-scratch"] = claim
	// Not the pod's: refused, the driver never called.
	if _, err := f.m.MountPod(ctx, p); err == nil || !strings.Contains(err.Error(), "PVC ns/web-scratch was not created for pod ns/web (pod is not owner)") {
		t.Fatalf("a claim the pod does not own: %v", err)
	}
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-1", Controller: ptr.To(true)}}
	f.api.pvs["pv-1"].Spec.ClaimRef.Name = "web-scratch"
	got, err := f.m.MountPod(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got["scratch"].Path != filepath.Join(f.root, "pods", "uid-1", "volumes", pluginCSI, "pv-1", "mount") {
		t.Errorf("mounted at %s", got["scratch"].Path)
	}
	if c := f.node.takeCalls(); c != "stage eph-1, publish eph-1" {
		t.Errorf("calls %q", c)
	}
}

func TestCSIVolumeStats(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	f.csi.drivers["hostpath.csi"].Stats = true
	if _, err := f.m.MountPod(ctx, f.claimPod("uid-a", "vol-1")); err != nil {
		t.Fatal(err)
	}
	f.node.takeCalls()
	got, err := f.m.CSIVolumeStats(ctx, "uid-a")
	if err != nil {
		t.Fatal(err)
	}
	// By the pod's name for the volume, not the PersistentVolume's.
	if st, ok := got["vol"]; !ok || st.Capacity != 100 || st.Used != 30 || st.Available != 70 || st.Inodes != 10 || st.InodesAvailable != 9 {
		t.Errorf("stats %+v", got)
	}
	req := f.node.last["stats"].(*csispec.NodeGetVolumeStatsRequest)
	if !strings.HasSuffix(req.VolumePath, "/kubernetes.io~csi/pv-1/mount") || !strings.HasSuffix(req.StagingTargetPath, "/globalmount") {
		t.Errorf("stats request %+v", req)
	}
	// A driver without GET_VOLUME_STATS is not asked.
	f.csi.drivers["hostpath.csi"].Stats = false
	if got, _ := f.m.CSIVolumeStats(ctx, "uid-a"); len(got) != 0 || f.node.takeCalls() != "stats vol-1" {
		t.Errorf("a driver without stats: %v", got)
	}
}

func TestCSIBlockVolume(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	p := f.claimPod("uid-a", "blk-1")
	block := v1.PersistentVolumeBlock
	f.api.pvs["pv-1"].Spec.VolumeMode = &block
	got, err := f.m.MountPod(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(f.root, "pods", "uid-a", "volumes", pluginCSI, "pv-1", "dev")
	if m := got["vol"]; m.Path != dev || !m.Block {
		t.Errorf("mounted %+v, want the block device at %s", m, dev)
	}
	pub := f.node.last["publish"].(*csispec.NodePublishVolumeRequest)
	if pub.VolumeCapability.GetBlock() == nil || pub.TargetPath != dev {
		t.Errorf("publish request %+v, want block access to %s", pub, dev)
	}
	f.node.takeCalls()
	if err := f.m.UnmountPod(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if c := f.node.takeCalls(); c != "unpublish blk-1, unstage blk-1" {
		t.Errorf("teardown calls %q", c)
	}
}

func TestCSINodeExpansion(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	claims := &fakeClaimStatus{}
	f.m.cfg.ClaimStatus = claims
	f.csi.drivers["hostpath.csi"].Expand = true
	p := f.claimPod("uid-a", "vol-1")
	if _, err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	f.node.takeCalls()
	// Not pending on the node: nothing happens at the next sync.
	if _, err := f.m.MountPod(ctx, p); err != nil || f.node.takeCalls() != "" || len(claims.patches) != 0 {
		t.Fatalf("a sync without a pending expansion: %v %v", err, claims.patches)
	}
	// The controller expanded the volume to 2Gi and left the rest to the node.
	f.api.pvs["pv-1"].Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}
	f.api.claims["data"].Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{
		v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}
	if _, err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if c := f.node.takeCalls(); c != fmt.Sprintf("expand vol-1 %d", 2<<30) {
		t.Errorf("calls %q", c)
	}
	want := []string{
		`ns/data {"status":{"allocatedResourceStatuses":{"storage":"NodeResizeInProgress"}}}`,
		`ns/data {"status":{"allocatedResourceStatuses":{"storage":null},"capacity":{"storage":"2Gi"},"conditions":null}}`,
	}
	if fmt.Sprint(claims.patches) != fmt.Sprint(want) {
		t.Errorf("claim status patches\n%s\nwant\n%s", strings.Join(claims.patches, "\n"), strings.Join(want, "\n"))
	}
}

func TestCSITokensAndRepublish(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	obj := f.csi.objects["hostpath.csi"]
	obj.Name = "hostpath.csi"
	obj.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}}
	obj.Spec.RequiresRepublish = ptr.To(true)
	p := f.claimPod("uid-a", "vol-1")
	p.Spec.ServiceAccountName = "app"
	if _, err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	pub := f.node.last["publish"].(*csispec.NodePublishVolumeRequest)
	var tokens map[string]struct {
		Token      string `json:"token"`
		Expiration string `json:"expirationTimestamp"`
	}
	if err := json.Unmarshal([]byte(pub.VolumeContext[csiTokensKey]), &tokens); err != nil || !strings.HasPrefix(tokens["vault"].Token, "ns/app/uid-a/vault/") ||
		tokens["vault"].Expiration == "" {
		t.Errorf("tokens in the volume context %q (%v)", pub.VolumeContext[csiTokensKey], err)
	}
	if stage := f.node.last["stage"].(*csispec.NodeStageVolumeRequest); stage.VolumeContext[csiTokensKey] != "" {
		t.Error("the pod's tokens went to the node's stage")
	}
	f.node.takeCalls()
	// requiresRepublish: published again at the next sync, not staged again.
	if _, err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if c := f.node.takeCalls(); c != "publish vol-1" {
		t.Errorf("a sync of a requiresRepublish volume: calls %q, want one publish", c)
	}
	// serviceAccountTokenInSecrets: the tokens go in the secrets instead.
	obj.Spec.ServiceAccountTokenInSecrets = ptr.To(true)
	if _, err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	pub = f.node.last["publish"].(*csispec.NodePublishVolumeRequest)
	if pub.Secrets[csiTokensKey] == "" || pub.VolumeContext[csiTokensKey] != "" {
		t.Errorf("tokens with serviceAccountTokenInSecrets: secrets %v, context %v", pub.Secrets, pub.VolumeContext)
	}
}

func TestCSIAccessModes(t *testing.T) {
	for _, tc := range []struct {
		mode        v1.PersistentVolumeAccessMode
		multiWriter bool
		want        csispec.VolumeCapability_AccessMode_Mode
	}{
		{v1.ReadWriteOnce, false, csispec.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{v1.ReadWriteOnce, true, csispec.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{v1.ReadWriteOncePod, false, csispec.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{v1.ReadWriteOncePod, true, csispec.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
		{v1.ReadOnlyMany, false, csispec.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{v1.ReadWriteMany, true, csispec.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	} {
		if got := (csiVolume{accessMode: tc.mode}).capability(tc.multiWriter).AccessMode.Mode; got != tc.want {
			t.Errorf("%s (multi-writer driver %v): %s, want %s", tc.mode, tc.multiWriter, got, tc.want)
		}
	}
}

func TestCSIWaitsUntilReportedInUse(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	f.csi.objects["hostpath.csi"].Spec.AttachRequired = ptr.To(true)
	p := f.claimPod("uid-a", "vol-1")
	f.csi.attachments[csinames.AttachmentName("vol-1", "hostpath.csi", "node1")] = &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{Attached: true}}
	reported := false
	var asked []v1.UniqueVolumeName
	f.m.cfg.ReportedInUse = func(_ context.Context, name v1.UniqueVolumeName) (bool, error) {
		asked = append(asked, name)
		return reported, nil
	}
	if _, err := f.m.MountPod(ctx, p); err == nil || !strings.Contains(err.Error(), "not yet reported in use by the node") {
		t.Fatalf("a volume not yet in the node's volumesInUse: %v", err)
	}
	if c := f.node.takeCalls(); c != "" {
		t.Errorf("the driver was called before the node reported the volume in use: %q", c)
	}
	// The record written first is what puts the volume in the node's status.
	if got := fmt.Sprint(f.m.VolumesInUse()); got != "[kubernetes.io/csi/hostpath.csi^vol-1]" {
		t.Errorf("volumes in use while waiting: %s", got)
	}
	reported = true
	if _, err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if c := f.node.takeCalls(); c != "stage vol-1, publish vol-1" || fmt.Sprint(asked) != "[kubernetes.io/csi/hostpath.csi^vol-1 kubernetes.io/csi/hostpath.csi^vol-1]" {
		t.Errorf("calls %q, asked %v", c, asked)
	}
}

func TestCSIVolumeDirectoryCollision(t *testing.T) {
	f := newCSIFixture(t)
	ctx := context.Background()
	// An inline volume named like the claim's PersistentVolume would share its directory: refused.
	p := f.claimPod("uid-a", "vol-1")
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "pv-1", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "hostpath.csi"}}})
	_, err := f.m.MountPod(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "already holds volume") {
		t.Fatalf("two volumes in one directory: %v", err)
	}
	// The claim named twice: published once.
	f2 := newCSIFixture(t)
	twice := f2.claimPod("uid-b", "vol-2")
	twice.Spec.Volumes = append(twice.Spec.Volumes, v1.Volume{Name: "again", VolumeSource: twice.Spec.Volumes[0].VolumeSource})
	if _, err := f2.m.MountPod(ctx, twice); err != nil {
		t.Fatal(err)
	}
	if c := f2.node.takeCalls(); strings.Count(c, "publish") != 1 {
		t.Errorf("a claim named twice: calls %q, want one publish", c)
	}
}

func TestKeyedLocksForgetIdleKeys(t *testing.T) {
	var k keyedLocks
	unlock := k.lock("a")
	done := make(chan struct{})
	go func() { k.lock("a")(); close(done) }()
	unlock()
	<-done
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.locks) != 0 {
		t.Errorf("%d locks kept with nobody holding them", len(k.locks))
	}
}

// A driver whose NodePublishVolume hangs: the call is in flight (what the debug page shows) until its
// deadline, then fails; the volume is not set up and nothing is left in flight.
func TestCSIHungPublishInFlightUntilDeadline(t *testing.T) {
	f := newCSIFixture(t)
	f.node.hang = true
	f.m.callTimeout = 300 * time.Millisecond
	pod := f.claimPod("uid-a", "vol-1")
	done := make(chan error, 1)
	go func() {
		_, err := f.m.MountPod(context.Background(), pod)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The stage call before it may be seen in flight too, for a moment.
		c, ok := f.m.InFlight("uid-a")
		if ok && c.Call == "NodePublishVolume" {
			if c.Volume != "vol" || c.Driver != "hostpath.csi" {
				t.Errorf("in flight: %+v", c)
			}
			break
		}
		if ok && c.Call != "NodeStageVolume" {
			t.Fatalf("in flight: %+v, want the stage or the publish", c)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hung publish was never in flight (last seen: %+v %v)", c, ok)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("mount with a hung driver: %v, want the deadline's error", err)
	}
	if c, ok := f.m.InFlight("uid-a"); ok {
		t.Errorf("still in flight after the deadline: %+v", c)
	}
}

func TestVolumeHealthReport(t *testing.T) {
	entry := func(st csispec.VolumeHealthErrorType, reason, msg string) *csispec.VolumeHealth_VolumeHealthEntry {
		return &csispec.VolumeHealth_VolumeHealthEntry{Status: st, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name     string
		h        *csispec.VolumeHealth
		abnormal bool
		msg      string
	}{
		{"no report", nil, false, ""},
		{"healthy", &csispec.VolumeHealth{VolumeId: "v"}, false, ""},
		{"one problem", &csispec.VolumeHealth{HealthStatuses: []*csispec.VolumeHealth_VolumeHealthEntry{
			entry(csispec.VolumeHealthErrorType_INACCESSIBLE, "DataMissing", "the data is gone")}}, true, "the data is gone"},
		{"reasons and types when no message", &csispec.VolumeHealth{HealthStatuses: []*csispec.VolumeHealth_VolumeHealthEntry{
			entry(csispec.VolumeHealthErrorType_DEGRADED, "Slow", ""), nil, entry(csispec.VolumeHealthErrorType_DATA_LOSS, "", "")}},
			true, "Slow; DATA_LOSS"},
	} {
		if abnormal, msg := volumeHealth(tc.h); abnormal != tc.abnormal || msg != tc.msg {
			t.Errorf("%s: %v %q, want %v %q", tc.name, abnormal, msg, tc.abnormal, tc.msg)
		}
	}
}
