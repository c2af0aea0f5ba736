package apiserver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ephemeralClaimName is the name of the claim of a pod's generic ephemeral
// volume, as upstream's ephemeral.VolumeClaimName: `<pod>-<volume>`.
func ephemeralClaimName(pod *corev1.Pod, vol *corev1.Volume) string {
	return pod.Name + "-" + vol.Name
}

// claimIsForPod reports whether pvc is the claim made for pod's ephemeral
// volume: in its namespace and controlled by it, as upstream's
// ephemeral.VolumeIsForPod; otherwise it returns upstream's error.
func claimIsForPod(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.Namespace != pod.Namespace || !metav1.IsControlledBy(pvc, pod) {
		return fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name)
	}
	return nil
}

// ephemeralClaim returns the claim upstream's ephemeral volume controller
// creates for vol of pod: named by ephemeralClaimName, with the template's
// labels, annotations and spec, controlled by the pod (which blocks the
// pod's foreground deletion), so that the garbage collector deletes it with
// the pod.
func ephemeralClaim(pod *corev1.Pod, vol *corev1.Volume) *corev1.PersistentVolumeClaim {
	tmpl := vol.Ephemeral.VolumeClaimTemplate
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: ephemeralClaimName(pod, vol), Namespace: pod.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
	}
	if tmpl != nil {
		tmpl = tmpl.DeepCopy()
		pvc.Labels, pvc.Annotations, pvc.Spec = tmpl.Labels, tmpl.Annotations, tmpl.Spec
	}
	return pvc
}

// ephemeralClaims decides, as upstream's ephemeral volume controller syncs a
// pod, which claims to create for pod's generic ephemeral volumes, given the
// claims of its namespace by name: those of its volumes, in order, whose
// claim does not exist yet. A claim of that name the pod does not control
// stops the walk, as upstream's does, with the error upstream records on the
// pod (the volume is left alone: the kubelet refuses to use it). A pod being
// deleted gets nothing.
func ephemeralClaims(pod *corev1.Pod, claims map[string]*corev1.PersistentVolumeClaim) ([]*corev1.PersistentVolumeClaim, *volumeError) {
	if pod.DeletionTimestamp != nil {
		return nil, nil
	}
	var out []*corev1.PersistentVolumeClaim
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Ephemeral == nil {
			continue
		}
		if pvc := claims[ephemeralClaimName(pod, vol)]; pvc != nil {
			if err := claimIsForPod(pod, pvc); err != nil {
				return out, &volumeError{volume: vol.Name, err: err}
			}
			continue
		}
		out = append(out, ephemeralClaim(pod, vol))
	}
	return out, nil
}

// volumeError is why a pod's volume could not be given its claim.
type volumeError struct {
	volume string
	err    error
}

// message is the message of upstream's FailedBinding event.
func (e *volumeError) message() string {
	return fmt.Sprintf("ephemeral volume %s: %v", e.volume, e.err)
}
