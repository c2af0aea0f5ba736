package apiserver

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// claimRelease is what the ResourceClaim controller does to one claim
// (upstream's syncClaim): nothing when it is the zero value.
type claimRelease struct {
	// reservedFor is the claim's new status.reservedFor when update is set.
	reservedFor []resourceapi.ResourceClaimConsumerReference
	// update writes the status: reservedFor, without the allocation when
	// deallocate is set.
	update, deallocate bool
	// removeFinalizer takes resourceapi.Finalizer off the claim, after the
	// status is written.
	removeFinalizer bool
	// delete removes a claim made for a pod that is done or replaced.
	delete bool
}

// podDone says that none of pod's containers runs or will run: a terminal
// phase, or deleted before it was bound. A bound pod being deleted is not
// done: its node's kubelet unprepares its claims before it confirms the
// deletion, so that its reservations outlive its containers.
func podDone(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		pod.DeletionTimestamp != nil && pod.Spec.NodeName == ""
}

// releaseClaim decides what becomes of claim given its pods, looked up by
// name in its namespace (nil: none). A pod reservation stays while a pod of
// that name and UID exists that is not done; reservations of other kinds of
// consumers stay. When the last reservation goes, a claim with the finalizer
// is deallocated and loses the finalizer; a claim being deleted with no
// reservations loses its allocation and finalizer too. An unreserved claim
// made for a pod (controlled by it) is deleted once that pod is done or
// replaced; a claim whose pod is gone is the garbage collector's.
func releaseClaim(claim *resourceapi.ResourceClaim, pod func(name string) *corev1.Pod) claimRelease {
	var r claimRelease
	valid := make([]resourceapi.ResourceClaimConsumerReference, 0, len(claim.Status.ReservedFor))
	for _, ref := range claim.Status.ReservedFor {
		if ref.APIGroup == "" && ref.Resource == "pods" {
			if p := pod(ref.Name); p == nil || p.UID != ref.UID || podDone(p) {
				continue
			}
		}
		valid = append(valid, ref)
	}
	finalizer := slices.Contains(claim.Finalizers, resourceapi.Finalizer)
	switch {
	case len(valid) < len(claim.Status.ReservedFor):
		r.update, r.reservedFor = true, valid
		r.deallocate = len(valid) == 0 && finalizer && claim.Status.Allocation != nil
		r.removeFinalizer = finalizer && (r.deallocate || claim.Status.Allocation == nil)
	case finalizer && claim.DeletionTimestamp != nil && len(valid) == 0:
		r.deallocate = claim.Status.Allocation != nil
		r.update = r.deallocate
		r.reservedFor = valid
		r.removeFinalizer = true
	}
	if len(valid) == 0 && claim.DeletionTimestamp == nil {
		if name, uid := owningPod(claim); name != "" {
			if p := pod(name); p != nil && (p.UID != uid || podDone(p)) {
				r.delete = true
			}
		}
	}
	return r
}

// applyRelease carries out r on claim through the API. Writes carry the
// claim's resourceVersion: a claim changed meanwhile is judged again on the
// next pass.
func (c *controller) applyRelease(ctx context.Context, claim *resourceapi.ResourceClaim, r claimRelease) error {
	claims := c.client.ResourceV1().ResourceClaims(claim.Namespace)
	ignore := func(err error) bool { return err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
	if r.update {
		next := claim.DeepCopy()
		next.Status.ReservedFor = r.reservedFor
		if len(next.Status.ReservedFor) == 0 {
			next.Status.ReservedFor = nil
		}
		if r.deallocate {
			next.Status.Allocation = nil
		}
		updated, err := claims.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			if ignore(err) {
				return nil
			}
			return fmt.Errorf("release ResourceClaim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		claim = updated
	}
	if r.removeFinalizer && claim.Status.Allocation == nil {
		if i := slices.Index(claim.Finalizers, resourceapi.Finalizer); i >= 0 {
			next := claim.DeepCopy()
			next.Finalizers = slices.Delete(next.Finalizers, i, i+1)
			updated, err := claims.Update(ctx, next, metav1.UpdateOptions{})
			if err != nil {
				if ignore(err) {
					return nil
				}
				return fmt.Errorf("remove finalizer of ResourceClaim %s/%s: %w", claim.Namespace, claim.Name, err)
			}
			claim = updated
		}
	}
	if r.delete {
		err := claims.Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &claim.UID}})
		if !ignore(err) {
			return fmt.Errorf("delete ResourceClaim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
	}
	return nil
}
