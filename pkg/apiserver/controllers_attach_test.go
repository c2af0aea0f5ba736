package apiserver

import (
	"github.com/nodeagent/kubelet/pkg/csi/csinames"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// csiPV returns a csi PersistentVolume pre-bound to the claim default/claim.
func csiPV(name, driver, handle, claim string) *corev1.PersistentVolume {
	pv := testPV(name, "1Gi", "", claimRefTo("default", claim, ""))
	pv.Spec.HostPath, pv.Spec.CSI = nil, &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}
	pv.Status = corev1.PersistentVolumeStatus{}
	return pv
}

// setVolumesInUse makes node n1 report volumes in use, as its kubelet would.
func setVolumesInUse(t *testing.T, ts *testServer, in ...corev1.UniqueVolumeName) {
	t.Helper()
	ctx := ctxT(t)
	eventually(t, "the node's volumes in use", func() bool {
		n, err := ts.client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		n.Status.VolumesInUse = in
		_, err = ts.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err == nil
	})
}

// A pod bound to a node gets a VolumeAttachment for each of its claims bound to a csi volume whose driver
// requires attach, named as the csi attacher names it; it is deleted once no pod there uses the volume and
// the node no longer lists it in use, as kube-controller-manager's attach/detach controller does. A
// driver with attachRequired false gets none; a generic ephemeral volume's claim is attached like any.
func TestAttachDetachController(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	const attach, noattach = "attach.csi.example.com", "noattach.csi.example.com"
	for name, required := range map[string]bool{attach: true, noattach: false} {
		d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(required)}}
		if _, err := ts.client.StorageV1().CSIDrivers().Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pv := range []*corev1.PersistentVolume{csiPV("pv-a", attach, "vol-a", "a"), csiPV("pv-b", noattach, "vol-b", "b"),
		csiPV("pv-eph", attach, "vol-eph", "web-scratch")} {
		if _, err := ts.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pvcs := ts.client.CoreV1().PersistentVolumeClaims("default")
	for _, name := range []string{"a", "b"} {
		c := testPVC(name, "1Gi", nil)
		c.UID, c.Status = "", corev1.PersistentVolumeClaimStatus{}
		if _, err := pvcs.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claims bound", func() bool {
		l, err := pvcs.List(ctx, metav1.ListOptions{})
		for _, c := range l.Items {
			if c.Status.Phase != corev1.ClaimBound {
				return false
			}
		}
		return err == nil && len(l.Items) == 2
	})

	vas := ts.client.StorageV1().VolumeAttachments()
	pods := ts.client.CoreV1().Pods("default")
	p := testPod("db")
	p.Spec.NodeName = "n1"
	p.Spec.Volumes = []corev1.Volume{
		{Name: "a", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "a"}}},
		{Name: "b", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "b"}}},
		{Name: "inline", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: attach}}}}
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := csinames.AttachmentName("vol-a", attach, "n1")
	var va *storagev1.VolumeAttachment
	eventually(t, "the attachment of vol-a", func() bool {
		var err error
		va, err = vas.Get(ctx, name, metav1.GetOptions{})
		return err == nil
	})
	if va.Spec.Attacher != attach || va.Spec.NodeName != "n1" || ptr.Deref(va.Spec.Source.PersistentVolumeName, "") != "pv-a" ||
		va.Status.Attached {
		t.Errorf("attachment %+v", va)
	}
	if l, err := vas.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Errorf("attachments besides vol-a's (attachRequired false, inline): %v %+v", err, l)
	}

	// A generic ephemeral volume's claim, bound to a csi volume, is attached too.
	web := testPod("web")
	web.Spec.NodeName = "n1"
	web.Spec.Volumes = []corev1.Volume{ephemeralVolume("scratch", "1Gi")}
	if _, err := pods.Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ephName := csinames.AttachmentName("vol-eph", attach, "n1")
	eventually(t, "the attachment of the ephemeral volume", func() bool {
		_, err := vas.Get(ctx, ephName, metav1.GetOptions{})
		return err == nil
	})

	// While the node lists the volume in use, its attachment stays after the pod is gone.
	setVolumesInUse(t, ts, corev1.UniqueVolumeName("kubernetes.io/csi/"+attach+"^vol-a"))
	if err := pods.Delete(ctx, "db", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod gone", func() bool {
		_, err := pods.Get(ctx, "db", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	time.Sleep(1500 * time.Millisecond) // a periodic pass or more
	if _, err := vas.Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("attachment of a volume the node still uses: %v", err)
	}
	setVolumesInUse(t, ts)
	eventually(t, "the attachment deleted", func() bool {
		_, err := vas.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := vas.Get(ctx, ephName, metav1.GetOptions{}); err != nil {
		t.Errorf("the ephemeral volume's attachment, still used: %v", err)
	}
	// A pod that has finished needs its volumes no more.
	web2, err := pods.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web2.Status.Phase = corev1.PodSucceeded
	if _, err := pods.UpdateStatus(ctx, web2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ephemeral volume's attachment deleted", func() bool {
		_, err := vas.Get(ctx, ephName, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
