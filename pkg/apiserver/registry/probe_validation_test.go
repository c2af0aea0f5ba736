package registry

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestProbeValidation(t *testing.T) {
	exec := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}
	runSpecCases(t, oneContainer, []specCase{
		{"zero period is defaulted", func(s *corev1.PodSpec) {
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: exec, PeriodSeconds: 0}
		}, ""},
		{"negative period", func(s *corev1.PodSpec) {
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: exec, PeriodSeconds: -1}
		}, "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0"},
		{"negative failure threshold", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: exec, FailureThreshold: -3}
		}, "livenessProbe.failureThreshold: Invalid value: -3"},
		{"no handler", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{}
		}, "spec.containers[0].livenessProbe: Required value: must specify a handler type"},
		{"two handlers", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: exec.Exec,
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		}, "livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"},
		{"liveness success threshold", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: exec, SuccessThreshold: 2}
		}, "livenessProbe.successThreshold: Invalid value: 2: must be 1"},
		{"readiness success threshold", func(s *corev1.PodSpec) {
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: exec, SuccessThreshold: 2}
		}, ""},
		{"readiness grace period", func(s *corev1.PodSpec) {
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: exec, TerminationGracePeriodSeconds: ptr.To[int64](5)}
		}, "must not be set for readinessProbes"},
		{"zero probe grace period", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: exec, TerminationGracePeriodSeconds: ptr.To[int64](0)}
		}, "livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0"},
		{"bad port name", func(s *corev1.PodSpec) {
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("Not_A_Name")}}}
		}, "readinessProbe.httpGet.port: Invalid value: \"Not_A_Name\""},
		{"port out of range", func(s *corev1.PodSpec) {
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(70000)}}}
		}, "readinessProbe.tcpSocket.port: Invalid value: 70000"},
		{"grpc port", func(s *corev1.PodSpec) {
			s.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 0}}}
		}, "startupProbe.grpc.port: Invalid value: 0"},
		{"empty exec command", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}}
		}, "livenessProbe.exec.command: Required value"},
		{"probe on an init container", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "i", ReadinessProbe: &corev1.Probe{ProbeHandler: exec}}}
		}, "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"},
		{"probe on a sidecar", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "side", Image: "i", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				ReadinessProbe: &corev1.Probe{ProbeHandler: exec}}}
		}, ""},
		{"hook with two handlers", func(s *corev1.PodSpec) {
			s.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: exec.Exec, Sleep: &corev1.SleepAction{Seconds: 1}}}
		}, "lifecycle.preStop.sleep: Forbidden: may not specify more than 1 handler type"},
	})
}

// specCase is a pod spec change and a substring of the validation errors it must give (empty: valid).
type specCase struct {
	name   string
	mutate func(*corev1.PodSpec)
	want   string
}

// runSpecCases validates base (a fresh one per case) changed by each case, defaulted first as on create.
func runSpecCases(t *testing.T, base func() *corev1.PodSpec, cases []specCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(s)
			DefaultPodSpec(s)
			got := validatePodSpec(s, field.NewPath("spec")).ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("unexpected errors: %v", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Fatalf("errors %v, want one with %q", got, tc.want)
			}
		})
	}
}

func oneContainer() *corev1.PodSpec {
	return &corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}
}
