package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func withImageVolume(ref string, policy corev1.PullPolicy) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Volumes = []corev1.Volume{{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}}}
		s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "img", MountPath: "/img", SubPath: "sub"}}
	}
}

// volumes[].image is validated as kube-apiserver 1.35 validates it (a subPath mount of it is allowed); the
// messages are its.
func TestImageVolumeValidation(t *testing.T) {
	runSpecCases(t, oneContainer, []specCase{
		{"a tagged image, its subPath mounted", withImageVolume("registry.example/models:1", ""), ""},
		{"no reference", withImageVolume("", corev1.PullIfNotPresent), "spec.volumes[0].image.reference: Required value"},
		{"surrounding whitespace", withImageVolume(" models:1", ""),
			`spec.volumes[0].image.reference: Invalid value: " models:1": must not have leading or trailing whitespace`},
		{"an unknown pull policy", withImageVolume("models:1", "Sometimes"),
			`spec.volumes[0].image.pullPolicy: Unsupported value: "Sometimes"`},
	})
}

// The pull policy defaults as a container's: Always for :latest or no tag, IfNotPresent otherwise.
func TestImageVolumeDefaults(t *testing.T) {
	for ref, want := range map[string]corev1.PullPolicy{
		"models": corev1.PullAlways, "models:latest": corev1.PullAlways, "models:1": corev1.PullIfNotPresent,
		"models@sha256:" + "0123456789012345678901234567890123456789012345678901234567890123": corev1.PullIfNotPresent,
		"localhost:5000/models": corev1.PullAlways, "": corev1.PullIfNotPresent,
	} {
		s := oneContainer()
		withImageVolume(ref, "")(s)
		DefaultPodSpec(s)
		if got := s.Volumes[0].Image.PullPolicy; got != want {
			t.Errorf("%q: pullPolicy %q, want %q", ref, got, want)
		}
		if ref != "" {
			if errs := validatePodSpec(s, field.NewPath("spec")); len(errs) > 0 {
				t.Errorf("%q: %v", ref, errs)
			}
		}
	}
}
