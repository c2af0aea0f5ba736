package apiserver

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/csi/csinames"
)

// attachWorld is what the attach/detach decisions read: the pods (any), the
// claims by namespace/name, the PersistentVolumes, CSIDrivers and nodes by
// name, the VolumeAttachments there are, by name, and the names of those the
// controller knows to be its own (see ownAttachment).
type attachWorld struct {
	pods        []*corev1.Pod
	claims      map[string]*corev1.PersistentVolumeClaim
	volumes     map[string]*corev1.PersistentVolume
	drivers     map[string]*storagev1.CSIDriver
	nodes       map[string]*corev1.Node
	attachments map[string]*storagev1.VolumeAttachment
	known       map[string]bool
}

// attachment is a VolumeAttachment the controller wants: the csi
// PersistentVolume volume, of driver and handle, attached to node.
type attachment struct {
	name, driver, handle, node, volume string
}

// object is the VolumeAttachment upstream's csi attacher creates for a.
func (a attachment) object() *storagev1.VolumeAttachment {
	pv := a.volume
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: a.name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: a.driver, NodeName: a.node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}}
}

// podTerminated is upstream's volume util IsPodTerminated: the pod Succeeded
// or Failed, or is being deleted with none of its containers running.
func podTerminated(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses,
		p.Status.EphemeralContainerStatuses} {
		for _, s := range list {
			if s.State.Terminated == nil && s.State.Waiting == nil {
				return false
			}
		}
	}
	return true
}

// attachableVolume returns the PersistentVolume behind vol of pod when the
// attach/detach controller attaches it, as upstream's CreateVolumeSpec and
// csi plugin decide: a persistentVolumeClaim (or the claim of a generic
// ephemeral volume, when the pod controls it) that is Bound to a volume whose
// claimRef has the claim's UID, with a csi source whose driver requires
// attach (its CSIDriver says attachRequired, or there is none). nil for any
// other volume, inline csi volumes included: they are never attached.
func attachableVolume(w *attachWorld, pod *corev1.Pod, vol *corev1.Volume) *corev1.PersistentVolume {
	var claimName string
	switch {
	case vol.PersistentVolumeClaim != nil:
		claimName = vol.PersistentVolumeClaim.ClaimName
	case vol.Ephemeral != nil:
		claimName = ephemeralClaimName(pod, vol)
	default:
		return nil
	}
	pvc := w.claims[pod.Namespace+"/"+claimName]
	if pvc == nil || pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil
	}
	if vol.Ephemeral != nil && claimIsForPod(pod, pvc) != nil {
		return nil
	}
	pv := w.volumes[pvc.Spec.VolumeName]
	if pv == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pv.Spec.CSI == nil {
		return nil
	}
	if d := w.drivers[pv.Spec.CSI.Driver]; d != nil && d.Spec.AttachRequired != nil && !*d.Spec.AttachRequired {
		return nil
	}
	return pv
}

// multiAttachAllowed is upstream's reconciler isMultiAttachAllowed for a
// PersistentVolume: it may be attached to more than one node when it names
// no access mode, or ReadWriteMany or ReadOnlyMany.
func multiAttachAllowed(pv *corev1.PersistentVolume) bool {
	if len(pv.Spec.AccessModes) == 0 {
		return true
	}
	for _, m := range pv.Spec.AccessModes {
		if m == corev1.ReadWriteMany || m == corev1.ReadOnlyMany {
			return true
		}
	}
	return false
}

// desiredAttachments returns, by name, the VolumeAttachments upstream's
// attach/detach controller would have: one for each attachable volume (see
// attachableVolume) of each pod bound to an existing node and not
// terminated. A volume that may not be attached to more than one node (see
// multiAttachAllowed) is not attached to a node while it has an attachment to
// another one, as upstream refuses with its Multi-Attach error; among pods
// wanting it on several nodes at once, the oldest pod's node has it.
func desiredAttachments(w *attachWorld) map[string]attachment {
	pods := make([]*corev1.Pod, 0, len(w.pods))
	for _, p := range w.pods {
		if p.Spec.NodeName != "" && w.nodes[p.Spec.NodeName] != nil && !podTerminated(p) {
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	// holders are the nodes each volume is attached to, or about to be.
	holders := map[string]map[string]bool{}
	hold := func(volume, node string) {
		if holders[volume] == nil {
			holders[volume] = map[string]bool{}
		}
		holders[volume][node] = true
	}
	for _, va := range w.attachments {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
			hold(*pv, va.Spec.NodeName)
		}
	}
	out := map[string]attachment{}
	for _, p := range pods {
		for i := range p.Spec.Volumes {
			pv := attachableVolume(w, p, &p.Spec.Volumes[i])
			if pv == nil {
				continue
			}
			node := p.Spec.NodeName
			if h := holders[pv.Name]; len(h) > 0 && !h[node] && !multiAttachAllowed(pv) {
				continue
			}
			hold(pv.Name, node)
			name := csinames.AttachmentName(pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.Driver, node)
			out[name] = attachment{name: name, driver: pv.Spec.CSI.Driver, handle: pv.Spec.CSI.VolumeHandle, node: node, volume: pv.Name}
		}
	}
	return out
}

// mountedOnNode reports whether the node the attachment va is to still lists
// its volume in status.volumesInUse (as kubernetes.io/csi/<driver>^<handle>):
// its kubelet has not yet unmounted it. The volume is recognised by the
// attachment's name, so that it is found even when its PersistentVolume is
// gone. A node that is gone uses nothing.
func mountedOnNode(va *storagev1.VolumeAttachment, node *corev1.Node) bool {
	if node == nil {
		return false
	}
	for _, u := range node.Status.VolumesInUse {
		if driver, handle, ok := csinames.ParseUniqueVolumeName(string(u)); ok && csinames.AttachmentName(handle, driver, node.Name) == va.Name {
			return true
		}
	}
	return false
}

// ownAttachment reports whether va is one the controller manages, as
// upstream's finds its own when it starts (processVolumeAttachments): the
// attachment of a PersistentVolume that exists, is a csi volume of va's
// attacher, and va has the name the csi attacher gives it. An attachment of
// an inline spec or of a volume that is not there is left alone, unless it is
// in w.known (the controller made it, or saw it was its own while its volume
// was there), as upstream's actual state of the world keeps what it attached.
func ownAttachment(w *attachWorld, va *storagev1.VolumeAttachment) bool {
	if w.known[va.Name] {
		return true
	}
	src := va.Spec.Source.PersistentVolumeName
	if src == nil || w.volumes[*src] == nil || w.volumes[*src].Spec.CSI == nil {
		return false
	}
	csi := w.volumes[*src].Spec.CSI
	return csi.Driver == va.Spec.Attacher && va.Name == csinames.AttachmentName(csi.VolumeHandle, csi.Driver, va.Spec.NodeName)
}

// attachmentsToDelete returns, sorted, the VolumeAttachments to delete
// (detach) given the desired ones: the controller's own (see ownAttachment)
// that are not desired, not already being deleted, and whose volume the node
// no longer has mounted (see mountedOnNode), as upstream's reconciler waits
// for it.
func attachmentsToDelete(w *attachWorld, desired map[string]attachment) []string {
	var out []string
	for name, va := range w.attachments {
		if va.DeletionTimestamp != nil || !ownAttachment(w, va) {
			continue
		}
		if _, ok := desired[name]; ok || mountedOnNode(va, w.nodes[va.Spec.NodeName]) {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
