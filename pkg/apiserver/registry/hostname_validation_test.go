package registry

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// spec.hostnameOverride is validated as kube-apiserver 1.35 validates it; the messages are its.
func TestHostnameOverrideValidation(t *testing.T) {
	runSpecCases(t, oneContainer, []specCase{
		{"a subdomain", func(s *corev1.PodSpec) { s.HostnameOverride = ptr.To("my-host.example") }, ""},
		{"with setHostnameAsFQDN", func(s *corev1.PodSpec) {
			s.HostnameOverride, s.SetHostnameAsFQDN = ptr.To("h"), ptr.To(true)
		}, "spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true"},
		{"with hostNetwork", func(s *corev1.PodSpec) { s.HostnameOverride, s.HostNetwork = ptr.To("h"), true },
			"spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true"},
		{"too long", func(s *corev1.PodSpec) { s.HostnameOverride = ptr.To(strings.Repeat("a", 65)) },
			"spec.hostnameOverride: Too long: may not be more than 64"},
		{"not a subdomain", func(s *corev1.PodSpec) { s.HostnameOverride = ptr.To("Not_Valid") },
			"spec.hostnameOverride: Invalid value: \"Not_Valid\""},
	})
}
