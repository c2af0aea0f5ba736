package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
)

// A pod's generic ephemeral volume gets its claim <pod>-<volume>, controlled by the pod, made again when
// deleted while the pod lives, and deleted with the pod by the garbage collector; a claim of that name
// the pod does not own is left alone and the pod gets a FailedBinding warning, as kube-controller-manager's
// ephemeral volume controller does.
func TestEphemeralVolumeController(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods, pvcs := ts.client.CoreV1().Pods("default"), ts.client.CoreV1().PersistentVolumeClaims("default")
	p := testPod("web")
	p.Spec.Volumes = []corev1.Volume{ephemeralVolume("scratch", "1Gi")}
	pod, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var claim *corev1.PersistentVolumeClaim
	eventually(t, "the claim web-scratch", func() bool {
		claim, err = pvcs.Get(ctx, "web-scratch", metav1.GetOptions{})
		return err == nil
	})
	if !metav1.IsControlledBy(claim, pod) || !ptr.Deref(claim.OwnerReferences[0].BlockOwnerDeletion, false) ||
		claim.Labels["tier"] != "scratch" || claim.Annotations["note"] != "scratch" || claim.Status.Phase != corev1.ClaimPending {
		t.Errorf("claim %+v", claim)
	}

	// Deleted while the pod lives, it is made again.
	if err := pvcs.Delete(ctx, "web-scratch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim made again", func() bool {
		again, err := pvcs.Get(ctx, "web-scratch", metav1.GetOptions{})
		return err == nil && again.UID != claim.UID
	})

	// Another's claim of that name stays as it is, and the pod is told.
	other := testPVC("other-data", "1Gi", nil)
	other.UID, other.Status = "", corev1.PersistentVolumeClaimStatus{}
	if _, err := pvcs.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p2 := testPod("other")
	p2.Spec.Volumes = []corev1.Volume{ephemeralVolume("data", "1Gi")}
	if _, err := pods.Create(ctx, p2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := fields.Set{"involvedObject.name": "other", "reason": "FailedBinding"}.AsSelector().String()
	var evs *corev1.EventList
	eventually(t, "the FailedBinding warning", func() bool {
		evs, err = ts.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
		return err == nil && len(evs.Items) > 0
	})
	want := "ephemeral volume data: PVC default/other-data was not created for pod default/other (pod is not owner)"
	if ev := evs.Items[0]; ev.Type != corev1.EventTypeWarning || ev.Message != want || ev.Source.Component != "ephemeral_volume" {
		t.Errorf("event %+v", ev)
	}
	if got, err := pvcs.Get(ctx, "other-data", metav1.GetOptions{}); err != nil || len(got.OwnerReferences) != 0 {
		t.Errorf("another's claim changed: %v %+v", err, got)
	}

	// Gone with the pod.
	if err := pods.Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim deleted with its pod", func() bool {
		_, err := pvcs.Get(ctx, "web-scratch", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// The periodic passes recorded the warning once.
	evs, err = ts.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(evs.Items) != 1 {
		t.Errorf("warnings: %v %d", err, len(evs.Items))
	}
}
