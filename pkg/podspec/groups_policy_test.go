package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The pod's supplementalGroupsPolicy reaches the container's and the sandbox's CRI security contexts; unset
// is Merge.
func TestSupplementalGroupsPolicyPassed(t *testing.T) {
	strict, merge := v1.SupplementalGroupsPolicyStrict, v1.SupplementalGroupsPolicyMerge
	for _, tc := range []struct {
		sc   *v1.PodSecurityContext
		want runtimeapi.SupplementalGroupsPolicy
	}{
		{nil, runtimeapi.SupplementalGroupsPolicy_Merge},
		{&v1.PodSecurityContext{}, runtimeapi.SupplementalGroupsPolicy_Merge},
		{&v1.PodSecurityContext{SupplementalGroupsPolicy: &merge}, runtimeapi.SupplementalGroupsPolicy_Merge},
		{&v1.PodSecurityContext{SupplementalGroupsPolicy: &strict, SupplementalGroups: []int64{60000}}, runtimeapi.SupplementalGroupsPolicy_Strict},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: tc.sc, Containers: []v1.Container{{Name: "c"}}}}
		csc, err := ContainerSecurityContext(pod, &pod.Spec.Containers[0], "/seccomp", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := csc.GetSupplementalGroupsPolicy(); got != tc.want {
			t.Errorf("%+v: container policy %v, want %v", tc.sc, got, tc.want)
		}
		if got := SandboxSecurityContext(pod, nil).GetSupplementalGroupsPolicy(); got != tc.want {
			t.Errorf("%+v: sandbox policy %v, want %v", tc.sc, got, tc.want)
		}
	}
}
