package podfacts

import v1 "k8s.io/api/core/v1"

// InUserNamespace says whether the pod asks for a user namespace of its own (spec.hostUsers: false); unset
// is the host's, as upstream defaults it.
func InUserNamespace(pod *v1.Pod) bool {
	return pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
}
