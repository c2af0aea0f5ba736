package registry

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func groupsPolicyPod(policy *corev1.SupplementalGroupsPolicy, os *corev1.PodOS) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "i",
			ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
		RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, OS: os,
		SecurityContext: &corev1.PodSecurityContext{SupplementalGroupsPolicy: policy}}}
}

func TestSupplementalGroupsPolicyValidated(t *testing.T) {
	policy := func(p corev1.SupplementalGroupsPolicy) *corev1.SupplementalGroupsPolicy { return &p }
	for _, tc := range []struct {
		policy *corev1.SupplementalGroupsPolicy
		os     *corev1.PodOS
		want   string
	}{
		{nil, nil, ""},
		{policy(corev1.SupplementalGroupsPolicyMerge), nil, ""},
		{policy(corev1.SupplementalGroupsPolicyStrict), &corev1.PodOS{Name: corev1.Linux}, ""},
		{policy("Loose"), nil, `spec.securityContext.supplementalGroupsPolicy: Unsupported value: "Loose": supported values: "Merge", "Strict"`},
		{policy(corev1.SupplementalGroupsPolicyStrict), &corev1.PodOS{Name: corev1.Windows},
			"spec.securityContext.supplementalGroupsPolicy: Forbidden: cannot be set for a windows pod"},
	} {
		got := (podStrategy{}).Validate(groupsPolicyPod(tc.policy, tc.os)).ToAggregate()
		if (got == nil) != (tc.want == "") || (got != nil && !strings.Contains(got.Error(), tc.want)) {
			t.Errorf("%v on %v: %v, want %q", tc.policy, tc.os, got, tc.want)
		}
	}
}

func TestContainerStatusUserValidated(t *testing.T) {
	pod := groupsPolicyPod(nil, nil)
	pod.ResourceVersion = "1"
	old := pod.DeepCopy()
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c",
		User: &corev1.ContainerUser{Linux: &corev1.LinuxContainerUser{UID: 1000, GID: 1000, SupplementalGroups: []int64{1000, 60000}}}}}
	if errs := (podStrategy{}).ValidateStatusUpdate(pod, old); len(errs) != 0 {
		t.Errorf("a valid user: %v", errs)
	}
	pod.Status.ContainerStatuses[0].User.Linux.SupplementalGroups = []int64{-1}
	errs := (podStrategy{}).ValidateStatusUpdate(pod, old).ToAggregate()
	if errs == nil || !strings.Contains(errs.Error(), "status.containerStatuses[0].user.linux.supplementalGroups[0]") {
		t.Errorf("a negative group: %v", errs)
	}
}

// hostUsers: false with host namespaces or block devices, and procMount Unmasked without it, are refused with
// kube-apiserver 1.35's field paths and words.
func TestHostUsersValidated(t *testing.T) {
	unmasked := corev1.UnmaskedProcMount
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.PodSpec)
		want   []string
	}{
		{"user namespace", func(s *corev1.PodSpec) { s.HostUsers = new(bool) }, nil},
		{"unmasked in a user namespace", func(s *corev1.PodSpec) {
			s.HostUsers = new(bool)
			s.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: &unmasked}
		}, nil},
		{"host namespaces", func(s *corev1.PodSpec) {
			s.HostUsers, s.HostNetwork, s.HostPID, s.HostIPC = new(bool), true, true, true
		}, []string{"spec.hostNetwork: Forbidden: when `hostUsers` is false", "spec.HostPID: Forbidden: when `hostUsers` is false",
			"spec.HostIPC: Forbidden: when `hostUsers` is false"}},
		{"volume devices", func(s *corev1.PodSpec) {
			s.HostUsers = new(bool)
			s.Volumes = []corev1.Volume{{Name: "blk", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
			s.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}
		}, []string{"spec.containers[0].volumeDevices: Forbidden: when `hostUsers` is false"}},
		{"unmasked on the host's users", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: &unmasked}
		}, []string{"spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := groupsPolicyPod(nil, nil)
			tc.mutate(&pod.Spec)
			got := (podStrategy{}).Validate(pod).ToAggregate()
			if len(tc.want) == 0 {
				if got != nil {
					t.Fatalf("refused: %v", got)
				}
				return
			}
			for _, w := range tc.want {
				if got == nil || !strings.Contains(got.Error(), w) {
					t.Errorf("%v, want %q", got, w)
				}
			}
		})
	}
}
