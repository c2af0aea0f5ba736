package podspec

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SupplementalGroupsPolicy is the pod's supplementalGroupsPolicy as the CRI carries it: Strict when the pod
// says so, Merge (the default) otherwise. The API server admits no other value.
func SupplementalGroupsPolicy(pod *v1.Pod) runtimeapi.SupplementalGroupsPolicy {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SupplementalGroupsPolicy != nil &&
		*sc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		return runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return runtimeapi.SupplementalGroupsPolicy_Merge
}
