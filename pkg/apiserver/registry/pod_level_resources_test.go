package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// spec.resources is validated as kube-apiserver 1.35 validates it (PodLevelResources on); the messages and
// field paths are its.
func TestPodLevelResourcesValidation(t *testing.T) {
	withContainer := func(req, lim corev1.ResourceList) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].Resources = corev1.ResourceRequirements{Requests: req, Limits: lim}
		}
	}
	runSpecCases(t, oneContainer, []specCase{
		{"limits and requests", func(s *corev1.PodSpec) {
			s.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "64Mi"), Limits: rl("cpu", "1", "memory", "128Mi")}
		}, ""},
		{"huge pages with memory", func(s *corev1.PodSpec) {
			s.Resources = &corev1.ResourceRequirements{Requests: rl("memory", "64Mi", "hugepages-2Mi", "4Mi"), Limits: rl("memory", "64Mi", "hugepages-2Mi", "4Mi")}
		}, ""},
		{"an unsupported resource", func(s *corev1.PodSpec) {
			s.Resources = &corev1.ResourceRequirements{Limits: rl("cpu", "1", "ephemeral-storage", "1Gi")}
		}, `spec.resources.limits[ephemeral-storage]: Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", "memory"`},
		{"negative", func(s *corev1.PodSpec) { s.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "-1")} },
			`spec.resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0`},
		{"request above limit", func(s *corev1.PodSpec) {
			s.Resources = &corev1.ResourceRequirements{Requests: rl("memory", "256Mi"), Limits: rl("memory", "128Mi")}
		}, `spec.resources.requests: Invalid value: "256Mi": must be less than or equal to memory limit of 128Mi`},
		{"huge pages request not its limit", func(s *corev1.PodSpec) {
			s.Resources = &corev1.ResourceRequirements{Requests: rl("memory", "1Gi", "hugepages-2Mi", "2Mi"), Limits: rl("memory", "1Gi", "hugepages-2Mi", "4Mi")}
		}, `spec.resources.requests: Invalid value: "2Mi": must be equal to hugepages-2Mi limit of 4Mi`},
		{"huge pages alone", func(s *corev1.PodSpec) {
			s.Resources = &corev1.ResourceRequirements{Requests: rl("hugepages-2Mi", "2Mi"), Limits: rl("hugepages-2Mi", "2Mi")}
		}, "spec.resources: Forbidden: HugePages require cpu or memory"},
		{"claims", func(s *corev1.PodSpec) {
			s.Resources = &corev1.ResourceRequirements{Limits: rl("cpu", "1"), Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
		}, "spec.resources.claims: Forbidden: claims may not be set for Resources at pod-level"},
		{"a windows pod", func(s *corev1.PodSpec) {
			s.OS = &corev1.PodOS{Name: corev1.Windows}
			s.Resources = &corev1.ResourceRequirements{Limits: rl("cpu", "1")}
		}, "spec.resources: Forbidden: may not be set for a windows pod"},
		{"below the containers' requests", func(s *corev1.PodSpec) {
			withContainer(rl("cpu", "300m"), nil)(s)
			s.Containers = append(s.Containers, corev1.Container{Name: "second", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: rl("cpu", "300m")}})
			s.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "500m")}
		}, `spec.resources.requests[cpu]: Invalid value: "500m": must be greater than or equal to aggregate container requests of 600m`},
		{"a container's limit above the pod's", func(s *corev1.PodSpec) {
			withContainer(nil, rl("memory", "256Mi"))(s)
			s.Resources = &corev1.ResourceRequirements{Limits: rl("memory", "128Mi")}
		}, `spec.resources.containers[0][memory].limits: Invalid value: "256Mi": must be less than or equal to pod limits of 128Mi`},
	})
}

// Pod-level requests a pod leaves out are defaulted as upstream's defaultPodRequests: from the containers'
// aggregate request where they ask, else from the pod-level limit.
func TestPodLevelRequestsDefaulted(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{
			{Name: "a", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m")}},
			{Name: "b", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "200m")}},
		},
		Resources: &corev1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "128Mi")},
	}}
	DefaultPod(pod)
	got := pod.Spec.Resources.Requests
	if cpu, mem := got[corev1.ResourceCPU], got[corev1.ResourceMemory]; cpu.String() != "300m" || mem.String() != "128Mi" || len(got) != 2 {
		t.Errorf("pod-level requests %v, want cpu 300m (the containers') and memory 128Mi (the limit)", got)
	}
	// Without pod-level limits nothing is defaulted.
	pod = &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "busybox"}},
		Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}
	DefaultPod(pod)
	if got := pod.Spec.Resources.Requests; len(got) != 1 {
		t.Errorf("pod-level requests %v, want the cpu request alone", got)
	}
}
