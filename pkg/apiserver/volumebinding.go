package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Annotations kube-controller-manager's PersistentVolume controller sets.
const (
	annBindCompleted     = "pv.kubernetes.io/bind-completed"
	annBoundByController = "pv.kubernetes.io/bound-by-controller"
)

// claimClass returns the storage class a claim asks for ("" for none),
// reading the beta annotation first, as upstream.
func claimClass(c *corev1.PersistentVolumeClaim) string {
	if v, ok := c.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return v
	}
	if c.Spec.StorageClassName != nil {
		return *c.Spec.StorageClassName
	}
	return ""
}

// volumeClass returns a volume's storage class, the beta annotation first.
func volumeClass(v *corev1.PersistentVolume) string {
	if c, ok := v.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return c
	}
	return v.Spec.StorageClassName
}

// boundToClaim reports whether a volume's claimRef names claim (by
// namespace, name and, when the ref has one, UID).
func boundToClaim(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	r := v.Spec.ClaimRef
	return r != nil && r.Namespace == c.Namespace && r.Name == c.Name && (r.UID == "" || r.UID == c.UID)
}

func volumeMode(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	if m == nil {
		return corev1.PersistentVolumeFilesystem
	}
	return *m
}

// hasAccessModes reports whether a volume offers every access mode a claim asks for.
func hasAccessModes(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	for _, want := range c.Spec.AccessModes {
		found := false
		for _, m := range v.Spec.AccessModes {
			found = found || m == want
		}
		if !found {
			return false
		}
	}
	return true
}

// fits reports whether a volume satisfies a claim: large enough, of the same
// volume mode, storage class and volume attributes class, offering its
// access modes and, when it has a selector, matching it.
func fits(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	want := c.Spec.Resources.Requests[corev1.ResourceStorage]
	have := v.Spec.Capacity[corev1.ResourceStorage]
	if have.Cmp(want) < 0 || volumeMode(v.Spec.VolumeMode) != volumeMode(c.Spec.VolumeMode) ||
		volumeClass(v) != claimClass(c) || !hasAccessModes(v, c) ||
		ptrValue(v.Spec.VolumeAttributesClassName) != ptrValue(c.Spec.VolumeAttributesClassName) {
		return false
	}
	if c.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(c.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(v.Labels)) {
			return false
		}
	}
	return true
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// volumeChoice narrows matchVolume. delay leaves out every volume not
// pre-bound to the claim: the PV controller's view of a claim whose class
// binds on the first consumer. node, when set, leaves out the volumes whose
// node affinity excludes it, and skip the volumes chosen already for other
// claims: the scheduler's view (upstream's FindMatchingVolume with a node).
type volumeChoice struct {
	delay bool
	node  *corev1.Node
	skip  map[string]bool
}

// matchVolume returns the volume a Pending claim binds to, as upstream's
// FindMatchingVolume: the volume pre-bound to it (by its claimRef, or the
// claim's volumeName) if that one fits, else the smallest Available volume
// without a claimRef that fits (unless how.delay). Volumes being deleted are
// never chosen. nil when none fits.
func matchVolume(c *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, how volumeChoice) *corev1.PersistentVolume {
	var best *corev1.PersistentVolume
	for _, v := range volumes {
		if v.DeletionTimestamp != nil || !fits(v, c) || how.skip[v.Name] {
			continue
		}
		if how.node != nil && !volumeFitsNode(v, how.node) {
			continue
		}
		if c.Spec.VolumeName != "" {
			if v.Name == c.Spec.VolumeName && (v.Spec.ClaimRef == nil || boundToClaim(v, c)) {
				return v
			}
			continue
		}
		if v.Spec.ClaimRef != nil {
			if boundToClaim(v, c) {
				return v
			}
			continue
		}
		if how.delay || v.Status.Phase != corev1.VolumeAvailable {
			continue
		}
		size := v.Spec.Capacity[corev1.ResourceStorage]
		if best == nil {
			best = v
			continue
		}
		bestSize := best.Spec.Capacity[corev1.ResourceStorage]
		if size.Cmp(bestSize) < 0 {
			best = v
		}
	}
	return best
}

// volumePhase returns the phase a volume should be in, given the claims by
// namespace/name, as upstream's syncVolume decides it for statically
// provisioned volumes: Available without a claimRef or pre-bound to a claim
// not yet there; Bound when its claim is bound to it; Released once the
// claim it was bound to (by UID) is gone. "" leaves the phase as it is (a
// binding in progress, or Failed).
func volumePhase(v *corev1.PersistentVolume, claims map[string]*corev1.PersistentVolumeClaim) corev1.PersistentVolumePhase {
	if v.Status.Phase == corev1.VolumeFailed {
		return ""
	}
	r := v.Spec.ClaimRef
	if r == nil {
		return corev1.VolumeAvailable
	}
	c := claims[r.Namespace+"/"+r.Name]
	switch {
	case c == nil || r.UID != "" && c.UID != r.UID:
		if r.UID == "" {
			return corev1.VolumeAvailable // pre-bound, waiting for its claim
		}
		return corev1.VolumeReleased
	case c.Spec.VolumeName == v.Name:
		return corev1.VolumeBound
	}
	return ""
}

// claimLost reports whether a Bound claim has lost its volume: the volume is
// gone, or bound to another claim.
func claimLost(c *corev1.PersistentVolumeClaim, volumes map[string]*corev1.PersistentVolume) bool {
	v := volumes[c.Spec.VolumeName]
	return v == nil || v.Spec.ClaimRef != nil && !boundToClaim(v, c)
}
