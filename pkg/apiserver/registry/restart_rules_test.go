package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Containers' restartPolicy and restartPolicyRules are validated as kube-apiserver 1.35 validates them
// (ContainerRestartRules on by default); the messages are its.
func TestRestartRulesValidation(t *testing.T) {
	in := func(codes ...int32) []corev1.ContainerRestartRule {
		return []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}}
	}
	runSpecCases(t, oneContainer, []specCase{
		{"a rule with a policy", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			s.Containers[0].RestartPolicyRules = in(42)
		}, ""},
		{"a container's own policy", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
		}, ""},
		{"rules without a policy", func(s *corev1.PodSpec) { s.Containers[0].RestartPolicyRules = in(42) },
			"spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used"},
		{"an unknown policy", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicy("Sometimes"))
		}, `spec.containers[0].restartPolicy: Unsupported value: "Sometimes"`},
		{"a rule without exit codes", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			s.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart}}
		}, "spec.containers[0].restartPolicyRules[0].exitCodes: Required value: must be specified"},
		{"an unknown operator", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			s.Containers[0].RestartPolicyRules = in(1)
			s.Containers[0].RestartPolicyRules[0].ExitCodes.Operator = "Above"
		}, `spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "Above"`},
		{"RestartAllContainers (alpha, off)", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			s.Containers[0].RestartPolicyRules = in(1)
			s.Containers[0].RestartPolicyRules[0].Action = corev1.ContainerRestartRuleActionRestartAllContainers
		}, `spec.containers[0].restartPolicyRules[0].action: Unsupported value: "RestartAllContainers"`},
		{"rules on a sidecar", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "side", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile, TerminationMessagePath: "/dev/termination-log",
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), RestartPolicyRules: in(1)}}
		}, "spec.initContainers[0].restartPolicyRules: Forbidden: restartPolicyRules are not allowed for init containers with restart policy Always"},
	})
}
