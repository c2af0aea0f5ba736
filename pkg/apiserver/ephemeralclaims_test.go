package apiserver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// ephemeralVolume returns a generic ephemeral volume asking for size.
func ephemeralVolume(name, size string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "scratch"}, Annotations: map[string]string{"note": name}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}}}}
}

// claimOwnedBy returns a claim name in default controlled (or, with controller false, merely owned) by uid.
func claimOwnedBy(name string, uid types.UID, controller bool) *corev1.PersistentVolumeClaim {
	c := testPVC(name, "1Gi", nil)
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: uid, Controller: ptr.To(controller)}}
	return c
}

// A pod's generic ephemeral volumes get the claims upstream's ephemeral volume controller creates:
// <pod>-<volume>, from the template, controlled by the pod; a claim of that name the pod does not control
// stops the walk with upstream's error.
func TestEphemeralClaims(t *testing.T) {
	t.Parallel()
	pod := func(mod func(*corev1.Pod)) *corev1.Pod {
		p := testPod("web")
		p.Namespace, p.UID = "default", "web-uid"
		p.Spec.Volumes = []corev1.Volume{ephemeralVolume("scratch", "1Gi"),
			{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			ephemeralVolume("cache", "2Gi")}
		if mod != nil {
			mod(p)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		claims  []*corev1.PersistentVolumeClaim
		want    []string
		wantErr string
	}{
		{"none yet", pod(nil), nil, []string{"web-scratch", "web-cache"}, ""},
		{"one there", pod(nil), []*corev1.PersistentVolumeClaim{claimOwnedBy("web-scratch", "web-uid", true)}, []string{"web-cache"}, ""},
		{"all there", pod(nil), []*corev1.PersistentVolumeClaim{claimOwnedBy("web-scratch", "web-uid", true),
			claimOwnedBy("web-cache", "web-uid", true)}, nil, ""},
		{"another's claim first", pod(nil), []*corev1.PersistentVolumeClaim{testPVC("web-scratch", "1Gi", nil)}, nil,
			"ephemeral volume scratch: PVC default/web-scratch was not created for pod default/web (pod is not owner)"},
		{"another's claim second", pod(nil), []*corev1.PersistentVolumeClaim{claimOwnedBy("web-cache", "old-uid", true)},
			[]string{"web-scratch"}, "ephemeral volume cache: PVC default/web-cache was not created for pod default/web"},
		{"owned but not controlled", pod(nil), []*corev1.PersistentVolumeClaim{claimOwnedBy("web-scratch", "web-uid", false)}, nil,
			"pod is not owner"},
		{"being deleted", pod(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }), nil, nil, ""},
		{"no ephemeral volume", pod(func(p *corev1.Pod) { p.Spec.Volumes = p.Spec.Volumes[1:2] }), nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claims := map[string]*corev1.PersistentVolumeClaim{}
			for _, c := range tc.claims {
				claims[c.Name] = c
			}
			got, err := ephemeralClaims(tc.pod, claims)
			var names []string
			for _, c := range got {
				names = append(names, c.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("claims %v, want %v", names, tc.want)
			}
			switch {
			case err == nil && tc.wantErr != "":
				t.Errorf("no error, want %q", tc.wantErr)
			case err != nil && (tc.wantErr == "" || !strings.Contains(err.message(), tc.wantErr)):
				t.Errorf("error %q, want %q", err.message(), tc.wantErr)
			}
		})
	}
}

// The claim made for a volume has the template's labels, annotations and spec, in the pod's namespace,
// and the pod as its controller, blocking the pod's foreground deletion.
func TestEphemeralClaim(t *testing.T) {
	t.Parallel()
	p := testPod("web")
	p.Namespace, p.UID = "ns1", "web-uid"
	vol := ephemeralVolume("scratch", "1Gi")
	got := ephemeralClaim(p, &vol)
	tmpl := vol.Ephemeral.VolumeClaimTemplate
	if got.Name != "web-scratch" || got.Namespace != "ns1" || !equality.Semantic.DeepEqual(got.Labels, tmpl.Labels) ||
		!equality.Semantic.DeepEqual(got.Annotations, tmpl.Annotations) || !equality.Semantic.DeepEqual(got.Spec, tmpl.Spec) {
		t.Errorf("claim %+v, template %+v", got, tmpl)
	}
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "web-uid",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	if !equality.Semantic.DeepEqual(got.OwnerReferences, want) {
		t.Errorf("owner references %+v", got.OwnerReferences)
	}
	got.Labels["tier"] = "changed"
	if tmpl.Labels["tier"] != "scratch" {
		t.Error("the claim shares the template's labels")
	}
}
