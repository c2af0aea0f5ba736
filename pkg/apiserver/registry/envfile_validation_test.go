package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// env files (fileKeyRef) are validated as kube-apiserver 1.35 validates them; the messages are its.
func TestFileKeyRefValidation(t *testing.T) {
	ref := func(vol, path, key string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{
				FileKeyRef: &corev1.FileKeySelector{VolumeName: vol, Path: path, Key: key}}}}
		}
	}
	withVolumes := func() *corev1.PodSpec {
		s := oneContainer()
		s.Volumes = []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}}}}
		return s
	}
	runSpecCases(t, withVolumes, []specCase{
		{"valid", ref("config", "app.env", "CONFIG_MAIN"), ""},
		{"a relaxed key", ref("config", "app.env", "my.key-1"), ""},
		{"no key", ref("config", "app.env", ""), "spec.containers[0].env[0].valueFrom.fileKeyRef.key: Required value"},
		{"a key with =", ref("config", "app.env", "A=B"), "spec.containers[0].env[0].valueFrom.fileKeyRef.key: Invalid value"},
		{"a path with ..", ref("config", "../etc/passwd", "K"), "fileKeyRef.path: Invalid value: \"../etc/passwd\": must not contain '..'"},
		{"no path", ref("config", "", "K"), "fileKeyRef.path: Required value"},
		{"an unknown volume", ref("nope", "app.env", "K"), "fileKeyRef.volumeName: Not found: \"nope\""},
		{"not an emptyDir", ref("host", "app.env", "K"), "fileKeyRef.volumeName: Invalid value: \"host\": referenced volume must be of type emptyDir"},
	})
}
