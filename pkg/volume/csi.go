package volume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/internal/atomicfile"
	"github.com/nodeagent/kubelet/pkg/csi"
	"github.com/nodeagent/kubelet/pkg/csi/csinames"
)

const (
	pluginCSI = "kubernetes.io~csi"
	// csiTimeout bounds each CSI call, as upstream's csiTimeout does.
	csiTimeout  = 2 * time.Minute
	volDataFile = "vol_data.json"
)

// CSIDrivers finds the registered CSI drivers (package csi's Registry).
type CSIDrivers interface {
	Driver(name string) (*csi.Driver, error)
}

// ClaimStatus records a claim's status (a merge patch of its status subresource): the node's side of a
// volume expansion.
type ClaimStatus interface {
	PatchClaimStatus(ctx context.Context, namespace, name string, patch []byte) error
}

// CSIAPI reads what CSI volumes need of the API: the driver's CSIDriver and the volume's attachment.
type CSIAPI interface {
	CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error)
	VolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error)
}

// volData is what the kubelet writes beside each CSI mount, under upstream's keys, so that a restarted
// kubelet knows which driver and handle to unpublish and unstage.
type volData struct {
	SpecVolID    string `json:"specVolID,omitempty"`
	VolumeHandle string `json:"volumeHandle"`
	DriverName   string `json:"driverName"`
	NodeName     string `json:"nodeName,omitempty"`
	AttachmentID string `json:"attachmentID,omitempty"`
	// LifecycleMode is "Persistent" or "Ephemeral".
	LifecycleMode string `json:"volumeLifecycleMode,omitempty"`
	// PodVolume is the pod's name for the volume (not upstream's: its stats are reported under it).
	PodVolume string `json:"podVolume,omitempty"`
	// Block is a raw block volume, published to the file "dev" beside the record instead of the directory
	// "mount" (not upstream's layout, which keeps block volumes under volumeDevices).
	Block bool `json:"block,omitempty"`
}

// target is where the volume is published: the directory "mount", or for a block volume the file "dev".
func (d volData) target(dir string) string {
	if d.Block {
		return filepath.Join(dir, "dev")
	}
	return filepath.Join(dir, "mount")
}

func readVolData(path string) (volData, error) {
	var d volData
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s does not parse: %w", path, err)
	}
	if d.VolumeHandle == "" {
		return d, fmt.Errorf("%s names no volume handle", path)
	}
	// The driver name is joined into the global directory's path: a record written by someone else must
	// not lead outside it.
	if err := csi.ValidateDriverName(d.DriverName); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

func writeVolData(path string, d volData) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

// keyedLocks serialises the operations on one volume (by driver and handle): a pod publishing it and
// another pod's teardown deciding whether to unstage it. A key's lock is dropped when nobody holds or waits
// for it (inline volumes have a handle per pod).
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l, ok := k.locks[key]
	if !ok {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// stagingPath is where the volume of data is staged (its global directory's globalmount).
func (m *Manager) stagingPath(data volData) string {
	return filepath.Join(m.stagingDir(data.DriverName, data.VolumeHandle), "globalmount")
}

// stagingDir is upstream's global directory of a volume: <root>/plugins/kubernetes.io/csi/<driver>/<sha256
// of the handle>, holding vol_data.json and the globalmount the driver stages to.
func (m *Manager) stagingDir(driver, handle string) string {
	return filepath.Join(m.cfg.RootDir, "plugins", "kubernetes.io", "csi", driver, handleDir(handle))
}

// setUpCSI stages (once per node) and publishes (once per pod) a CSI volume, as upstream's csi plugin does.
// A volume already published to the pod is used as it is.
func (m *Manager) setUpCSI(ctx context.Context, pod *v1.Pod, v csiVolume) (Mounted, error) {
	if err := csi.ValidateDriverName(v.driver); err != nil {
		return Mounted{}, err
	}
	if v.handle == "" {
		return Mounted{}, fmt.Errorf("the csi volume of driver %s has no volume handle", v.driver)
	}
	dir := m.volumeDir(pod.UID, pluginCSI, v.specName)
	target := volData{Block: v.block}.target(dir)
	published := m.cfg.Mounter.IsMountPoint(target)
	if published {
		if size, ok := needsNodeExpansion(v.claim, v.pv); ok {
			// An expansion failure is retried at the next sync; the pod keeps its volume meanwhile, and the
			// claim's status says where the resize stands.
			if err := m.expandCSI(ctx, v, volData{VolumeHandle: v.handle, DriverName: v.driver}, target, size); err != nil {
				klog.FromContext(ctx).Error(err, "Volume expansion on the node failed", "pod", klog.KObj(pod), "volume", v.podVolume)
			}
		}
		if !m.republishes(ctx, v.driver) {
			return Mounted{Path: target, ReadOnly: v.readOnly, Block: v.block}, nil
		}
		// The CSIDriver asks for requiresRepublish: NodePublishVolume again at every sync (with fresh
		// service account tokens), as upstream's remount does; a failure leaves the volume as it is.
		calls, err := m.publishCSI(ctx, pod, v, dir, target, true)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Republishing a CSI volume failed", "pod", klog.KObj(pod), "volume", v.podVolume)
		}
		return Mounted{Path: target, ReadOnly: v.readOnly, Block: v.block, Calls: calls}, nil
	}
	calls, err := m.publishCSI(ctx, pod, v, dir, target, false)
	if err != nil {
		return Mounted{}, err
	}
	klog.FromContext(ctx).V(2).Info("Published CSI volume", "pod", klog.KObj(pod), "driver", v.driver, "volume", v.specName, "target", target)
	return Mounted{Path: target, ReadOnly: v.readOnly, Block: v.block, Calls: calls}, nil
}

// timed runs a driver call for the pod's volume v, recorded as in flight meanwhile, and appends how long it
// took to calls.
func (m *Manager) timed(calls *[]Call, pod types.UID, v csiVolume, name string, call func() error) error {
	start := m.cfg.Clock.Now()
	m.mu.Lock()
	m.inFlight[pod] = InFlightCall{Call: name, Volume: v.podVolume, Driver: v.driver, Since: start}
	m.mu.Unlock()
	err := call()
	m.mu.Lock()
	delete(m.inFlight, pod)
	m.mu.Unlock()
	*calls = append(*calls, Call{Name: name, Start: start, Took: m.cfg.Clock.Since(start)})
	return err
}

// InFlight returns the driver call under way for one of the pod's volumes, if any: what a pod whose start
// waits on a slow or hung driver waits for.
func (m *Manager) InFlight(pod types.UID) (InFlightCall, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.inFlight[pod]
	return c, ok
}

// republishes says whether the driver's CSIDriver asks for requiresRepublish.
func (m *Manager) republishes(ctx context.Context, driver string) bool {
	obj, err := m.csiDriverObject(ctx, driver)
	return err == nil && obj != nil && obj.Spec.RequiresRepublish != nil && *obj.Spec.RequiresRepublish
}

// publishCSI stages (unless republishing) and publishes the volume to target, recording it first. It returns
// the driver calls it made, with their times.
func (m *Manager) publishCSI(ctx context.Context, pod *v1.Pod, v csiVolume, dir, target string, republish bool) (calls []Call, err error) {
	if m.cfg.CSI == nil {
		return calls, &csi.NotRegisteredError{Name: v.driver}
	}
	drv, err := m.cfg.CSI.Driver(v.driver)
	if err != nil {
		return calls, fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: %w", err)
	}
	obj, err := m.csiDriverObject(ctx, v.driver)
	if err != nil {
		return calls, err
	}
	if err := v.checkLifecycle(obj); err != nil {
		return calls, err
	}
	node := m.cfg.Node().Name
	data := volData{SpecVolID: v.specName, VolumeHandle: v.handle, DriverName: v.driver, NodeName: node,
		LifecycleMode: string(storagev1.VolumeLifecyclePersistent), PodVolume: v.podVolume, Block: v.block}
	var publishContext map[string]string
	if v.ephemeral {
		data.LifecycleMode = string(storagev1.VolumeLifecycleEphemeral)
	} else if attachRequired(obj) {
		data.AttachmentID = csinames.AttachmentName(v.handle, v.driver, node)
		if publishContext, err = m.attached(ctx, data.AttachmentID, v); err != nil {
			return calls, err
		}
	}
	stageSecrets, err := m.csiSecrets(ctx, v.stageSecret)
	if err != nil {
		return calls, err
	}
	publishSecrets, err := m.csiSecrets(ctx, v.publishSecret)
	if err != nil {
		return calls, err
	}
	volumeContext := v.volumeContext(pod, obj)
	if tokens, err := m.csiTokens(ctx, pod, obj); err != nil {
		return calls, err
	} else if tokens != "" {
		// Upstream's CSIServiceAccountTokenSecrets: in the secrets when the CSIDriver asks, else in the
		// volume context.
		if obj.Spec.ServiceAccountTokenInSecrets != nil && *obj.Spec.ServiceAccountTokenInSecrets {
			publishSecrets = withKey(publishSecrets, csiTokensKey, tokens)
		} else {
			volumeContext = withKey(volumeContext, csiTokensKey, tokens)
		}
	}

	// The volume's directory, then the volume: two of a pod's volumes that come to one directory (a claim
	// named twice, an inline volume named like a claim's PersistentVolume) are set up one after the other.
	defer m.csiLocks.lock("dir:" + dir)()
	defer m.csiLocks.lock(v.driver + "/" + v.handle)()
	if !republish {
		record := filepath.Join(dir, volDataFile)
		if old, err := readVolData(record); err == nil && (old.DriverName != v.driver || old.VolumeHandle != v.handle) {
			return calls, fmt.Errorf("the volume's directory %s already holds volume %s of driver %s", dir, old.VolumeHandle, old.DriverName)
		}
		if m.cfg.Mounter.IsMountPoint(target) {
			return calls, nil // published meanwhile: the pod names the claim twice
		}
		// The record comes first: a kubelet killed after it finds, after its restart, what to unpublish
		// and unstage, whatever the driver had done by then.
		if err := writeVolData(record, data); err != nil {
			return calls, fmt.Errorf("record csi volume: %w", err)
		}
		// An attached volume is used only once the node's status lists it in use (the record just written
		// puts it there), as upstream waits: the attach/detach controller then never detaches it under the
		// node, however soon the pod goes.
		if data.AttachmentID != "" && m.cfg.ReportedInUse != nil {
			name := v1.UniqueVolumeName(csinames.UniqueVolumeName(v.driver, v.handle))
			if ok, err := m.cfg.ReportedInUse(ctx, name); err != nil || !ok {
				return calls, errors.Join(fmt.Errorf("volume %s is not yet reported in use by the node (status.volumesInUse)", name), err)
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	defer cancel()
	staging := ""
	if drv.StageUnstage && !v.ephemeral {
		sdir := m.stagingDir(v.driver, v.handle)
		staging = filepath.Join(sdir, "globalmount")
		if !republish {
			if err := writeVolData(filepath.Join(sdir, volDataFile), volData{VolumeHandle: v.handle, DriverName: v.driver}); err != nil {
				return calls, fmt.Errorf("record csi volume: %w", err)
			}
			if err := os.MkdirAll(staging, 0o750); err != nil {
				return calls, err
			}
			// The stage is the node's, shared by the pods: the volume's attributes, without a pod's identity.
			if err := m.timed(&calls, pod.UID, v, "NodeStageVolume", func() error {
				_, err := drv.Node.NodeStageVolume(cctx, &csispec.NodeStageVolumeRequest{VolumeId: v.handle, PublishContext: publishContext,
					StagingTargetPath: staging, VolumeCapability: v.capability(drv.SingleNodeMultiWriter), Secrets: stageSecrets, VolumeContext: v.attributes})
				return err
			}); err != nil {
				return calls, fmt.Errorf("MountVolume.MountDevice failed: %w", err)
			}
		}
	}
	if err := m.timed(&calls, pod.UID, v, "NodePublishVolume", func() error {
		_, err := drv.Node.NodePublishVolume(cctx, &csispec.NodePublishVolumeRequest{VolumeId: v.handle, PublishContext: publishContext,
			StagingTargetPath: staging, TargetPath: target, VolumeCapability: v.capability(drv.SingleNodeMultiWriter), Readonly: v.readOnly,
			Secrets: publishSecrets, VolumeContext: volumeContext})
		return err
	}); err != nil {
		return calls, err
	}
	if g := podFSGroup(pod); g != nil && !republish && !v.readOnly && !v.block && v.appliesFSGroup(obj) {
		if err := chownTree(target, *g); err != nil {
			return calls, fmt.Errorf("apply fsGroup: %w", err)
		}
	}
	return calls, nil
}

// csiDriverObject reads the driver's CSIDriver; a driver without one gets upstream's defaults (nil). A read
// serves for Config.Reuse (the syncs of every pod using the driver's volumes within it), as configMaps do.
func (m *Manager) csiDriverObject(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	if m.cfg.CSIAPI == nil {
		return nil, nil
	}
	key := "csidriver//" + name
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	recent, fresh := m.recent[key]
	m.mu.Unlock()
	if fresh && now.Sub(recent.at) < m.cfg.Reuse {
		obj, _ := recent.obj.(*storagev1.CSIDriver)
		return obj, nil
	}
	obj, err := m.cfg.CSIAPI.CSIDriver(ctx, name)
	if apierrors.IsNotFound(err) {
		obj, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get CSIDriver %s: %w", name, err)
	}
	if m.cfg.Reuse > 0 {
		m.mu.Lock()
		m.recent[key] = readObject{obj: obj, at: now}
		m.mu.Unlock()
	}
	return obj, nil
}

// attached waits for the volume's VolumeAttachment to say it is attached and returns its metadata, the
// publish context.
func (m *Manager) attached(ctx context.Context, name string, v csiVolume) (map[string]string, error) {
	if m.cfg.CSIAPI == nil {
		return nil, fmt.Errorf("volume %s of driver %s must be attached, and there is no API server to read its VolumeAttachment from", v.handle, v.driver)
	}
	va, err := m.cfg.CSIAPI.VolumeAttachment(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("volume %s of driver %s is not attached to this node yet: waiting for VolumeAttachment %s", v.handle, v.driver, name)
	}
	if err != nil {
		return nil, fmt.Errorf("get VolumeAttachment %s: %w", name, err)
	}
	if !va.Status.Attached {
		msg := ""
		if e := va.Status.AttachError; e != nil {
			msg = ": " + e.Message
		}
		return nil, fmt.Errorf("volume %s of driver %s is not attached to this node yet (VolumeAttachment %s)%s", v.handle, v.driver, name, msg)
	}
	return va.Status.AttachmentMetadata, nil
}

func (m *Manager) csiSecrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	if m.cfg.API == nil {
		return nil, fmt.Errorf("no API server to read secret %s/%s from", ref.Namespace, ref.Name)
	}
	s, err := m.cfg.API.Secret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data)+len(s.StringData))
	for k, b := range s.Data {
		out[k] = string(b)
	}
	return out, nil
}

// tearDownCSI unpublishes the pod's CSI volumes and unstages those no other pod uses, reading what to do
// from the vol_data.json each has (so it works the same after a restart). A volume whose driver is not
// registered stays, and the teardown is tried again later; a record that does not parse is logged and its
// mount left to the pod's generic unmount.
func (m *Manager) tearDownCSI(ctx context.Context, uid types.UID) error {
	base := filepath.Join(m.PodDir(uid), "volumes", pluginCSI)
	entries, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(base, e.Name())
		data, err := readVolData(filepath.Join(dir, volDataFile))
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot tell which CSI driver a volume belongs to; unmounting it without the driver",
				"podUID", uid, "volume", e.Name())
			continue
		}
		if err := m.tearDownCSIVolume(ctx, dir, data); err != nil {
			errs = append(errs, fmt.Errorf("volume %q of driver %s: %w", e.Name(), data.DriverName, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) tearDownCSIVolume(ctx context.Context, dir string, data volData) error {
	defer m.csiLocks.lock(data.DriverName + "/" + data.VolumeHandle)()
	target := data.target(dir)
	// The driver unpublishes whatever the record names, mounted or not, as upstream's TearDownAt always
	// asks: a publication that failed half way (an inline volume's storage made, a block device linked
	// rather than mounted) is the driver's to undo. Without the driver nothing is done, and the teardown is
	// retried.
	drv, err := m.driver(data.DriverName)
	if err != nil {
		return fmt.Errorf("UnmountVolume.TearDown: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, csiTimeout)
	_, err = drv.Node.NodeUnpublishVolume(cctx, &csispec.NodeUnpublishVolumeRequest{VolumeId: data.VolumeHandle, TargetPath: target})
	cancel()
	if err != nil {
		return fmt.Errorf("UnmountVolume.TearDown failed: %w", err)
	}
	if m.cfg.Mounter.IsMountPoint(target) {
		return fmt.Errorf("UnmountVolume.TearDown: the driver left %s mounted", target)
	}
	if data.LifecycleMode != string(storagev1.VolumeLifecycleEphemeral) && !m.csiVolumeInUse(data, dir) {
		if err := m.unstage(ctx, data, drv); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Unpublished CSI volume", "driver", data.DriverName, "path", dir)
	return nil
}

// unstage unstages a volume no pod uses any more, if it was staged (its global directory exists), and
// removes the global directory.
func (m *Manager) unstage(ctx context.Context, data volData, drv *csi.Driver) error {
	sdir := m.stagingDir(data.DriverName, data.VolumeHandle)
	staging := filepath.Join(sdir, "globalmount")
	if _, err := os.Stat(sdir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if drv.StageUnstage {
		cctx, cancel := context.WithTimeout(ctx, csiTimeout)
		_, err := drv.Node.NodeUnstageVolume(cctx, &csispec.NodeUnstageVolumeRequest{VolumeId: data.VolumeHandle, StagingTargetPath: staging})
		cancel()
		if err != nil {
			return fmt.Errorf("UnmountDevice failed: %w", err)
		}
	}
	if m.cfg.Mounter.IsMountPoint(staging) {
		return fmt.Errorf("UnmountDevice: the driver left %s mounted", staging)
	}
	return os.RemoveAll(sdir)
}

func (m *Manager) driver(name string) (*csi.Driver, error) {
	if m.cfg.CSI == nil {
		return nil, &csi.NotRegisteredError{Name: name}
	}
	return m.cfg.CSI.Driver(name)
}

// csiVolumeInUse says whether a pod other than the one at self has the volume published or being
// published (a vol_data.json of the same driver and handle).
func (m *Manager) csiVolumeInUse(data volData, self string) bool {
	found, _ := filepath.Glob(filepath.Join(m.cfg.RootDir, "pods", "*", "volumes", pluginCSI, "*", volDataFile))
	for _, p := range found {
		if filepath.Dir(p) == self {
			continue
		}
		// A record that does not parse may name this volume: it counts as a user until its pod's teardown
		// removes it.
		if d, err := readVolData(p); err != nil || d.DriverName == data.DriverName && d.VolumeHandle == data.VolumeHandle {
			return true
		}
	}
	return false
}

// VolumesInUse lists the attach-required CSI volumes published on the node, under upstream's unique names
// (kubernetes.io/csi/<driver>^<handle>), sorted, for the node's status.volumesInUse: a record exists from
// before the first driver call until the teardown has finished.
func (m *Manager) VolumesInUse() []v1.UniqueVolumeName {
	found, _ := filepath.Glob(filepath.Join(m.cfg.RootDir, "pods", "*", "volumes", pluginCSI, "*", volDataFile))
	seen := map[v1.UniqueVolumeName]bool{}
	var out []v1.UniqueVolumeName
	for _, p := range found {
		d, err := readVolData(p)
		if err != nil || d.AttachmentID == "" {
			continue
		}
		name := v1.UniqueVolumeName(csinames.UniqueVolumeName(d.DriverName, d.VolumeHandle))
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
