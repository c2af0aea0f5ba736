package apiserver

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bindVolumes does in the small what kube-controller-manager's
// PersistentVolume controller does for statically provisioned volumes:
// Pending claims are bound to the volumes that fit them (see matchVolume),
// claims whose volume is gone become Lost, and volumes take the phase their
// claims give them (see volumePhase). It writes through the API; a conflict
// waits for the next pass. It provisions nothing and reclaims nothing.
func (c *controller) bindVolumes(ctx context.Context) error {
	st := c.storage()
	volumes, claims, byName, byKey := st.volumes, st.claimList, st.byName, st.claims
	if len(volumes) == 0 && len(claims) == 0 {
		return nil
	}
	// The oldest claims first, as they were made.
	sort.SliceStable(claims, func(i, j int) bool { return claims[i].CreationTimestamp.Before(&claims[j].CreationTimestamp) })
	for _, pvc := range claims {
		if pvc.DeletionTimestamp != nil {
			continue
		}
		switch pvc.Status.Phase {
		case corev1.ClaimPending, "":
			// A claim waiting for its first consumer binds only to the volume
			// placement pre-bound to it.
			v := matchVolume(pvc, volumes, volumeChoice{delay: st.delayBinding(pvc)})
			if v == nil {
				continue
			}
			bound, err := c.bindClaim(ctx, v, pvc)
			if err != nil {
				return err
			}
			if bound != nil { // taken for the rest of the pass
				*v = *bound
				byKey[pvc.Namespace+"/"+pvc.Name] = pvc
			}
		case corev1.ClaimBound:
			if claimLost(pvc, byName) {
				if err := c.setClaimPhase(ctx, pvc, corev1.ClaimLost); err != nil {
					return err
				}
			}
		}
	}
	for _, v := range volumes {
		if phase := volumePhase(v, byKey); phase != "" && phase != v.Status.Phase {
			if err := c.setVolumePhase(ctx, v, phase); err != nil {
				return err
			}
		}
	}
	return nil
}

// storage reads the claims, volumes and storage classes from the store.
func (c *controller) storage() *storageState {
	pvObjs, _ := c.s.store.List("persistentvolumes/")
	pvcObjs, _ := c.s.store.List("persistentvolumeclaims/")
	scObjs, _ := c.s.store.List("storageclasses/")
	return newStorageState(decodeAll[corev1.PersistentVolumeClaim](c.s, pvcObjs),
		decodeAll[corev1.PersistentVolume](c.s, pvObjs), decodeAll[storagev1.StorageClass](c.s, scObjs))
}

// preBindVolumes writes what placing a pod on node takes before the pod is
// bound, as upstream's scheduler (BindPodVolumes): each chosen volume's
// claimRef, which the PV controller's pass (bindVolumes) completes into a
// binding, and the selected-node annotation on each claim a provisioner is
// to make a volume for. A conflict or an object gone leaves it to the next
// pass.
func (c *controller) preBindVolumes(ctx context.Context, st *storageState, b *volumeBindings, node string) error {
	retry := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsNotFound(err) }
	for _, s := range b.static {
		vol := s.pv.DeepCopy()
		metav1.SetMetaDataAnnotation(&vol.ObjectMeta, annBoundByController, "yes")
		vol.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: s.pvc.Namespace,
			Name: s.pvc.Name, UID: s.pvc.UID, ResourceVersion: s.pvc.ResourceVersion}
		updated, err := c.client.CoreV1().PersistentVolumes().Update(ctx, vol, metav1.UpdateOptions{})
		if retry(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pre-bind volume %s to claim %s/%s: %w", s.pv.Name, s.pvc.Namespace, s.pvc.Name, err)
		}
		*s.pv = *updated // taken for the rest of the pass
		st.chosen[s.pv.Name] = true
	}
	for _, pvc := range b.provision {
		if pvc.Annotations[annSelectedNode] == node {
			continue
		}
		claim := pvc.DeepCopy()
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, annSelectedNode, node)
		updated, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
		if retry(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("select node %s for claim %s/%s: %w", node, pvc.Namespace, pvc.Name, err)
		}
		*pvc = *updated
	}
	return nil
}

// bindClaim binds v and pvc to each other, in upstream's order: the volume's
// claimRef, its phase, the claim's volumeName, its status. It returns the
// volume as bound, or nil when a conflict or a vanished object leaves the
// binding to the next pass. pvc is updated in place.
func (c *controller) bindClaim(ctx context.Context, v *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	retry := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsNotFound(err) }
	pvs, pvcs := c.client.CoreV1().PersistentVolumes(), c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace)
	vol := v.DeepCopy()
	if !boundToClaim(vol, pvc) || vol.Spec.ClaimRef.UID == "" {
		if !boundToClaim(vol, pvc) {
			metav1.SetMetaDataAnnotation(&vol.ObjectMeta, annBoundByController, "yes")
		}
		vol.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace,
			Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
		updated, err := pvs.Update(ctx, vol, metav1.UpdateOptions{})
		if retry(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("bind volume %s to claim %s/%s: %w", v.Name, pvc.Namespace, pvc.Name, err)
		}
		vol = updated
	}
	if vol.Status.Phase != corev1.VolumeBound {
		if err := c.setVolumePhase(ctx, vol, corev1.VolumeBound); err != nil {
			return nil, err
		}
		vol.Status.Phase = corev1.VolumeBound
	}
	claim := pvc.DeepCopy()
	if claim.Spec.VolumeName != vol.Name || claim.Annotations[annBindCompleted] != "yes" {
		if claim.Spec.VolumeName == "" {
			metav1.SetMetaDataAnnotation(&claim.ObjectMeta, annBoundByController, "yes")
		}
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, annBindCompleted, "yes")
		claim.Spec.VolumeName = vol.Name
		updated, err := pvcs.Update(ctx, claim, metav1.UpdateOptions{})
		if retry(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("bind claim %s/%s to volume %s: %w", pvc.Namespace, pvc.Name, vol.Name, err)
		}
		claim = updated
	}
	claim.Status.Phase = corev1.ClaimBound
	claim.Status.AccessModes = append([]corev1.PersistentVolumeAccessMode(nil), vol.Spec.AccessModes...)
	claim.Status.Capacity = vol.Spec.Capacity.DeepCopy()
	updated, err := pvcs.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if retry(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("update status of claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	*pvc = *updated
	return vol, nil
}

// setVolumePhase records a volume's new phase and when it changed.
func (c *controller) setVolumePhase(ctx context.Context, v *corev1.PersistentVolume, phase corev1.PersistentVolumePhase) error {
	next := v.DeepCopy()
	now := metav1.NewTime(c.s.cfg.Clock.Now().Truncate(time.Second))
	next.Status.Phase, next.Status.LastPhaseTransitionTime = phase, &now
	_, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update phase of volume %s: %w", v.Name, err)
	}
	return nil
}

// setClaimPhase records a claim's new phase.
func (c *controller) setClaimPhase(ctx context.Context, pvc *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase) error {
	next := pvc.DeepCopy()
	next.Status.Phase = phase
	_, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update phase of claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}
