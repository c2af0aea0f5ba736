package volume

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// csiVolume is what the kubelet passes a CSI driver for one volume of a pod, from a PersistentVolume's csi
// source or from an inline csi volume.
type csiVolume struct {
	// specName names the volume's directory under the pod's kubernetes.io~csi: the PersistentVolume's name,
	// or the pod's volume name for an inline volume (upstream's spec name).
	specName string
	// podVolume is the pod's name for the volume (its volumes[].name).
	podVolume    string
	driver       string
	handle       string
	readOnly     bool
	fsType       string
	mountOptions []string
	accessMode   v1.PersistentVolumeAccessMode
	// singleNode says the volume's access modes include ReadWriteOnce or ReadWriteOncePod (upstream's
	// hasReadWriteOnce, for the fsGroup policy).
	singleNode  bool
	attributes  map[string]string
	stageSecret *v1.SecretReference
	// publishSecret is read from its namespace; an inline volume's is in the pod's.
	publishSecret *v1.SecretReference
	ephemeral     bool
	// block is a raw block volume (the PersistentVolume's volumeMode Block).
	block bool
	// claim and pv are the claim and volume a persistent volume comes from (nil for inline volumes): the
	// node's side of an expansion reads them.
	claim *v1.PersistentVolumeClaim
	pv    *v1.PersistentVolume
}

// csiFromPV is the volume a claim's PersistentVolume with a csi source gives the pod.
func csiFromPV(pv *v1.PersistentVolume, readOnly bool) csiVolume {
	src := pv.Spec.CSI
	v := csiVolume{specName: pv.Name, driver: src.Driver, handle: src.VolumeHandle, readOnly: readOnly || src.ReadOnly,
		fsType: src.FSType, mountOptions: pv.Spec.MountOptions, attributes: src.VolumeAttributes,
		stageSecret: src.NodeStageSecretRef, publishSecret: src.NodePublishSecretRef}
	if len(pv.Spec.AccessModes) > 0 {
		v.accessMode = pv.Spec.AccessModes[0]
	}
	for _, m := range pv.Spec.AccessModes {
		v.singleNode = v.singleNode || m == v1.ReadWriteOnce || m == v1.ReadWriteOncePod
	}
	v.block = pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock
	return v
}

// csiInline is an inline (ephemeral) csi volume of the pod. Its handle is upstream's: "csi-" and the
// SHA-256 of the pod's UID and the volume's name, so the driver sees one volume per pod and name.
func csiInline(pod *v1.Pod, vol *v1.Volume) csiVolume {
	src := vol.CSI
	v := csiVolume{specName: vol.Name, podVolume: vol.Name, driver: src.Driver, handle: inlineHandle(string(pod.UID), vol.Name),
		readOnly: src.ReadOnly != nil && *src.ReadOnly, attributes: src.VolumeAttributes, accessMode: v1.ReadWriteOnce, singleNode: true,
		ephemeral: true}
	if src.FSType != nil {
		v.fsType = *src.FSType
	}
	if src.NodePublishSecretRef != nil {
		v.publishSecret = &v1.SecretReference{Namespace: pod.Namespace, Name: src.NodePublishSecretRef.Name}
	}
	return v
}

func inlineHandle(podUID, volume string) string {
	sum := sha256.Sum256([]byte(podUID + volume))
	return "csi-" + hex.EncodeToString(sum[:])
}

// handleDir is the directory of a volume handle under the driver's global directory: the handle hashed, so
// that a handle with "/" or ".." never becomes a path.
func handleDir(handle string) string {
	sum := sha256.Sum256([]byte(handle))
	return hex.EncodeToString(sum[:])
}

// capability is the volume capability the driver is asked for: a filesystem with the volume's type and
// mount options (or block access), and the access mode mapped as upstream maps it: ReadWriteOnce and
// ReadWriteOncePod become SINGLE_NODE_MULTI_WRITER and SINGLE_NODE_SINGLE_WRITER for drivers that offer
// those modes (multiWriter), SINGLE_NODE_WRITER for the others.
func (v csiVolume) capability(multiWriter bool) *csispec.VolumeCapability {
	mode := csispec.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	switch v.accessMode {
	case v1.ReadOnlyMany:
		mode = csispec.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		mode = csispec.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case v1.ReadWriteOnce:
		if multiWriter {
			mode = csispec.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
	case v1.ReadWriteOncePod:
		if multiWriter {
			mode = csispec.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
	}
	c := &csispec.VolumeCapability{
		AccessType: &csispec.VolumeCapability_Mount{Mount: &csispec.VolumeCapability_MountVolume{FsType: v.fsType, MountFlags: v.mountOptions}},
		AccessMode: &csispec.VolumeCapability_AccessMode{Mode: mode},
	}
	if v.block {
		c.AccessType = &csispec.VolumeCapability_Block{Block: &csispec.VolumeCapability_BlockVolume{}}
	}
	return c
}

// volumeContext is the volume's attributes, with the pod's identity when the driver asks for it
// (podInfoOnMount), under upstream's keys.
func (v csiVolume) volumeContext(pod *v1.Pod, driver *storagev1.CSIDriver) map[string]string {
	if driver == nil || driver.Spec.PodInfoOnMount == nil || !*driver.Spec.PodInfoOnMount {
		return v.attributes
	}
	ctx := make(map[string]string, len(v.attributes)+5)
	for k, val := range v.attributes {
		ctx[k] = val
	}
	ctx["csi.storage.k8s.io/pod.name"] = pod.Name
	ctx["csi.storage.k8s.io/pod.namespace"] = pod.Namespace
	ctx["csi.storage.k8s.io/pod.uid"] = string(pod.UID)
	ctx["csi.storage.k8s.io/serviceAccount.name"] = pod.Spec.ServiceAccountName
	ctx["csi.storage.k8s.io/ephemeral"] = strconv.FormatBool(v.ephemeral)
	return ctx
}

// checkLifecycle refuses a volume of a mode the driver's CSIDriver does not list: inline volumes need a
// CSIDriver that lists Ephemeral; persistent ones are allowed without a CSIDriver, as upstream allows them.
func (v csiVolume) checkLifecycle(driver *storagev1.CSIDriver) error {
	want := storagev1.VolumeLifecyclePersistent
	if v.ephemeral {
		want = storagev1.VolumeLifecycleEphemeral
	}
	var modes []storagev1.VolumeLifecycleMode
	if driver != nil {
		modes = driver.Spec.VolumeLifecycleModes
	}
	if len(modes) == 0 {
		modes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	for _, m := range modes {
		if m == want {
			return nil
		}
	}
	return fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", want, v.driver, modes)
}

// attachRequired is the CSIDriver's attachRequired; a driver without a CSIDriver object is attached, as
// upstream assumes.
func attachRequired(driver *storagev1.CSIDriver) bool {
	return driver == nil || driver.Spec.AttachRequired == nil || *driver.Spec.AttachRequired
}

// appliesFSGroup says whether the pod's fsGroup is applied to the published volume, by the CSIDriver's
// fsGroupPolicy: File always, None never, ReadWriteOnceWithFSType (the default) when the volume has a
// filesystem type and a single-node access mode.
func (v csiVolume) appliesFSGroup(driver *storagev1.CSIDriver) bool {
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if driver != nil && driver.Spec.FSGroupPolicy != nil {
		policy = *driver.Spec.FSGroupPolicy
	}
	switch policy {
	case storagev1.FileFSGroupPolicy:
		return true
	case storagev1.NoneFSGroupPolicy:
		return false
	}
	return v.fsType != "" && v.singleNode
}
