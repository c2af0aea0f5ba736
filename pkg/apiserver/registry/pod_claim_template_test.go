package registry

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod's generic ephemeral volume needs a volumeClaimTemplate with a valid claim spec and nothing but
// labels and annotations in its metadata, and a pod name that makes a valid claim name, as upstream's
// validation; no other volume may name the claim made for it.
func TestEphemeralVolumeValidation(t *testing.T) {
	t.Parallel()
	template := func(mod func(*corev1.PersistentVolumeClaimTemplate)) *corev1.EphemeralVolumeSource {
		tmpl := &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}, Annotations: map[string]string{"note": "scratch"}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if mod != nil {
			mod(tmpl)
		}
		return &corev1.EphemeralVolumeSource{VolumeClaimTemplate: tmpl}
	}
	pod := func(name string, vols ...corev1.Volume) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "i"}}, Volumes: vols}}
		DefaultPod(p)
		return p
	}
	eph := func(name string, src *corev1.EphemeralVolumeSource) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Ephemeral: src}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []string // substrings of the error; none: valid
	}{
		{"a template", pod("p", eph("scratch", template(nil))), nil},
		{"no template", pod("p", eph("scratch", &corev1.EphemeralVolumeSource{})),
			[]string{"spec.volumes[0].ephemeral.volumeClaimTemplate: Required value"}},
		{"a template without spec", pod("p", eph("scratch", template(func(t *corev1.PersistentVolumeClaimTemplate) {
			t.Spec = corev1.PersistentVolumeClaimSpec{}
		}))), []string{"spec.volumes[0].ephemeral.volumeClaimTemplate.spec.accessModes: Required value",
			"spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources.requests[storage]: Required value"}},
		{"a template naming its claim", pod("p", eph("scratch", template(func(t *corev1.PersistentVolumeClaimTemplate) {
			t.Name, t.Namespace = "mine", "other"
		}))), []string{"spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.name: Forbidden: cannot be set",
			"spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.namespace: Forbidden: cannot be set"}},
		{"a template with a bad label", pod("p", eph("scratch", template(func(t *corev1.PersistentVolumeClaimTemplate) {
			t.Labels = map[string]string{"bad key!": "x"}
		}))), []string{"spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.labels: Invalid value"}},
		{"a claim name too long", pod(strings.Repeat("p", 250), eph("scratch", template(nil))),
			[]string{`spec.volumes[0].name: Invalid value: "scratch": PVC name "ppp`}},
		{"a claim volume naming the claim made for another", pod("p", eph("scratch", template(nil)),
			corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "p-scratch"}}}),
			[]string{"spec.volumes[1].persistentVolumeClaim.claimName: Invalid value: \"p-scratch\": must not reference a PVC that gets created for an ephemeral volume"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := podStrategy{}.Validate(tc.pod)
			if len(tc.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errText(errs))
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("accepted, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(errText(errs), w) {
					t.Errorf("error %q lacks %q", errText(errs), w)
				}
			}
		})
	}
}
