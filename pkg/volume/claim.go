package volume

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setUpClaim sets up a persistentVolumeClaim volume, reading the claim and the volume it is bound to, as
// upstream's volume manager does. Volumes of type hostPath are used in place (their type checked); volumes of
// type local are bind-mounted into the pod's directory; volumes of type csi are staged and published by their
// driver. Any other type is refused with a message that names it (network volumes need drivers this node
// does not run).
//
// A generic ephemeral volume (volumes[].ephemeral) is the claim <pod>-<volume> the ephemeral volume controller
// made for the pod; a claim of that name the pod does not own is refused, as upstream refuses it.
func (m *Manager) setUpClaim(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (Mounted, error) {
	src := vol.PersistentVolumeClaim
	if vol.Ephemeral != nil {
		src = &v1.PersistentVolumeClaimVolumeSource{ClaimName: pod.Name + "-" + vol.Name}
	}
	if m.cfg.API == nil {
		return Mounted{}, fmt.Errorf("no API server to read persistentvolumeclaim %q from", src.ClaimName)
	}
	pvc, err := m.cfg.API.PersistentVolumeClaim(ctx, pod.Namespace, src.ClaimName)
	if err != nil {
		return Mounted{}, fmt.Errorf("get persistentvolumeclaim %q: %w", src.ClaimName, err)
	}
	if vol.Ephemeral != nil && !metav1.IsControlledBy(pvc, pod) {
		return Mounted{}, fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return Mounted{}, fmt.Errorf("persistentvolumeclaim %q is not bound", src.ClaimName)
	}
	pv, err := m.cfg.API.PersistentVolume(ctx, pvc.Spec.VolumeName)
	if err != nil {
		return Mounted{}, fmt.Errorf("get persistentvolume %q: %w", pvc.Spec.VolumeName, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != pod.Namespace || ref.Name != src.ClaimName {
		return Mounted{}, fmt.Errorf("persistentvolume %q is not bound to claim %q", pv.Name, src.ClaimName)
	}
	readOnly := src.ReadOnly
	switch {
	case pv.Spec.HostPath != nil:
		p := filepath.Clean(pv.Spec.HostPath.Path)
		if err := checkHostPath(p, pv.Spec.HostPath.Type); err != nil {
			return Mounted{}, err
		}
		return Mounted{Path: p, ReadOnly: readOnly}, nil
	case pv.Spec.Local != nil:
		target := m.volumeDir(pod.UID, pluginLocal, pv.Name)
		if m.cfg.Mounter.IsMountPoint(target) {
			return Mounted{Path: target, ReadOnly: readOnly}, nil
		}
		source := filepath.Clean(pv.Spec.Local.Path)
		fi, err := os.Stat(source)
		if err != nil {
			return Mounted{}, fmt.Errorf("local volume %q: %w", pv.Name, err)
		}
		if err := makeMountPoint(target, fi.IsDir()); err != nil {
			return Mounted{}, err
		}
		if err := m.cfg.Mounter.Bind(source, target, readOnly); err != nil {
			return Mounted{}, fmt.Errorf("bind local volume %q: %w", pv.Name, err)
		}
		return Mounted{Path: target, ReadOnly: readOnly}, nil
	case pv.Spec.CSI != nil:
		v := csiFromPV(pv, readOnly)
		v.podVolume, v.claim, v.pv = vol.Name, pvc, pv
		return m.setUpCSI(ctx, pod, v)
	}
	return Mounted{}, fmt.Errorf("persistentvolume %q is of type %s, which this node cannot mount (it mounts hostPath, local and csi volumes)", pv.Name, pvType(pv))
}

func pvType(pv *v1.PersistentVolume) string {
	switch s := pv.Spec.PersistentVolumeSource; {
	case s.CSI != nil:
		return "csi"
	case s.NFS != nil:
		return "nfs"
	case s.ISCSI != nil:
		return "iscsi"
	case s.FC != nil:
		return "fc"
	}
	return "unknown"
}
