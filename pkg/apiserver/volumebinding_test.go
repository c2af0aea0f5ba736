package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func testPV(name, size string, phase corev1.PersistentVolumePhase, mod func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}}},
		Status: corev1.PersistentVolumeStatus{Phase: phase}}
	if mod != nil {
		mod(pv)
	}
	return pv
}

func testPVC(name, size string, mod func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid")},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	if mod != nil {
		mod(c)
	}
	return c
}

func claimRefTo(ns, name, uid string) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: name, UID: types.UID(uid)}
	}
}

// A Pending claim binds to the smallest Available volume that fits it, or to the volume pre-bound to it, as
// upstream's FindMatchingVolume.
func TestMatchVolume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		want    string
	}{
		{"the smallest that fits", testPVC("c", "1Gi", nil), []*corev1.PersistentVolume{
			testPV("big", "10Gi", corev1.VolumeAvailable, nil), testPV("small", "512Mi", corev1.VolumeAvailable, nil),
			testPV("fit", "2Gi", corev1.VolumeAvailable, nil)}, "fit"},
		{"too small", testPVC("c", "1Gi", nil), []*corev1.PersistentVolume{testPV("small", "512Mi", corev1.VolumeAvailable, nil)}, ""},
		{"not Available yet", testPVC("c", "1Gi", nil), []*corev1.PersistentVolume{testPV("new", "1Gi", corev1.VolumePending, nil)}, ""},
		{"Released", testPVC("c", "1Gi", nil), []*corev1.PersistentVolume{testPV("old", "1Gi", corev1.VolumeReleased, nil)}, ""},
		{"bound to another claim", testPVC("c", "1Gi", nil), []*corev1.PersistentVolume{
			testPV("taken", "1Gi", corev1.VolumeAvailable, claimRefTo("default", "other", ""))}, ""},
		{"access modes it lacks", testPVC("c", "1Gi", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}), []*corev1.PersistentVolume{testPV("v", "1Gi", corev1.VolumeAvailable, nil)}, ""},
		{"another storage class", testPVC("c", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("fast") }),
			[]*corev1.PersistentVolume{testPV("v", "1Gi", corev1.VolumeAvailable, nil),
				testPV("fast", "5Gi", corev1.VolumeAvailable, func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = "fast" })}, "fast"},
		{"another volume mode", testPVC("c", "1Gi", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
		}), []*corev1.PersistentVolume{testPV("v", "1Gi", corev1.VolumeAvailable, nil)}, ""},
		{"a selector", testPVC("c", "1Gi", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "ssd"}}
		}), []*corev1.PersistentVolume{testPV("v", "1Gi", corev1.VolumeAvailable, nil),
			testPV("ssd", "8Gi", corev1.VolumeAvailable, func(pv *corev1.PersistentVolume) { pv.Labels = map[string]string{"disk": "ssd"} })}, "ssd"},
		{"pre-bound by the volume's claimRef, bigger", testPVC("c", "1Gi", nil), []*corev1.PersistentVolume{
			testPV("small", "1Gi", corev1.VolumeAvailable, nil),
			testPV("mine", "4Gi", corev1.VolumeAvailable, claimRefTo("default", "c", ""))}, "mine"},
		{"pre-bound to an earlier claim of that name", testPVC("c", "1Gi", nil), []*corev1.PersistentVolume{
			testPV("old", "1Gi", corev1.VolumeReleased, claimRefTo("default", "c", "gone"))}, ""},
		{"pre-bound by the claim's volumeName", testPVC("c", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "named" }),
			[]*corev1.PersistentVolume{testPV("fit", "1Gi", corev1.VolumeAvailable, nil), testPV("named", "2Gi", corev1.VolumePending, nil)}, "named"},
		{"being deleted", testPVC("c", "1Gi", nil), []*corev1.PersistentVolume{testPV("v", "1Gi", corev1.VolumeAvailable,
			func(pv *corev1.PersistentVolume) { pv.DeletionTimestamp = &metav1.Time{} })}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if v := matchVolume(tc.claim, tc.volumes, volumeChoice{}); v != nil {
				got = v.Name
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// A volume's phase follows its claim, as upstream's syncVolume for statically provisioned volumes.
func TestVolumePhase(t *testing.T) {
	t.Parallel()
	claims := map[string]*corev1.PersistentVolumeClaim{
		"default/bound":   testPVC("bound", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "v" }),
		"default/pending": testPVC("pending", "1Gi", nil),
	}
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want corev1.PersistentVolumePhase
	}{
		{"new", testPV("v", "1Gi", corev1.VolumePending, nil), corev1.VolumeAvailable},
		{"bound", testPV("v", "1Gi", corev1.VolumeAvailable, claimRefTo("default", "bound", "bound-uid")), corev1.VolumeBound},
		{"binding", testPV("v", "1Gi", corev1.VolumeAvailable, claimRefTo("default", "pending", "pending-uid")), ""},
		{"claim gone", testPV("v", "1Gi", corev1.VolumeBound, claimRefTo("default", "gone", "gone-uid")), corev1.VolumeReleased},
		{"claim re-created", testPV("v", "1Gi", corev1.VolumeBound, claimRefTo("default", "bound", "old-uid")), corev1.VolumeReleased},
		{"pre-bound, claim not there yet", testPV("v", "1Gi", corev1.VolumePending, claimRefTo("default", "later", "")), corev1.VolumeAvailable},
		{"claimRef removed from a released volume", testPV("v", "1Gi", corev1.VolumeReleased, nil), corev1.VolumeAvailable},
		{"failed", testPV("v", "1Gi", corev1.VolumeFailed, nil), ""},
	} {
		if got := volumePhase(tc.pv, claims); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	lost := testPVC("c", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "v" })
	if !claimLost(lost, map[string]*corev1.PersistentVolume{}) ||
		!claimLost(lost, map[string]*corev1.PersistentVolume{"v": testPV("v", "1Gi", corev1.VolumeBound, claimRefTo("default", "other", ""))}) ||
		claimLost(lost, map[string]*corev1.PersistentVolume{"v": testPV("v", "1Gi", corev1.VolumeBound, claimRefTo("default", "c", "c-uid"))}) {
		t.Error("claimLost")
	}
}
