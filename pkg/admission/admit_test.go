package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(cpu, mem string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	c := v1.Container{Name: "app"}
	if cpu != "" || mem != "" {
		c.Resources.Requests = v1.ResourceList{}
	}
	if cpu != "" {
		c.Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		c.Resources.Requests[v1.ResourceMemory] = resource.MustParse(mem)
	}
	p.Spec.Containers = []v1.Container{c}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestAdmit(t *testing.T) {
	node := Node{
		Name:   "node1",
		Labels: map[string]string{"disk": "ssd", "kubernetes.io/hostname": "node1", "gen": "5"},
		Taints: []v1.Taint{
			{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoExecute},
			{Key: "soft", Effect: v1.TaintEffectNoSchedule},
		},
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")},
		MaxPods:     3,
	}
	tolerate := func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "db", Effect: v1.TaintEffectNoExecute}}
	}
	affinity := func(op v1.NodeSelectorOperator, values ...string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
					{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "gen", Operator: op, Values: values}}},
				}},
			}}
		}
	}
	tests := []struct {
		name    string
		pod     *v1.Pod
		active  []*v1.Pod
		reason  string
		message string
	}{
		{name: "fits", pod: pod("500m", "100Mi", tolerate)},
		{name: "best effort fits a full node", pod: pod("", "", tolerate), active: []*v1.Pod{pod("2", "1Gi")}},
		{
			name: "too many pods", pod: pod("", "", tolerate), active: []*v1.Pod{pod("", ""), pod("", ""), pod("", "")},
			reason: ReasonOutOfPods, message: "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3",
		},
		{
			name: "cpu", pod: pod("1500m", "", tolerate), active: []*v1.Pod{pod("1", "")},
			reason: ReasonOutOfCPU, message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000",
		},
		{name: "memory", pod: pod("", "2Gi", tolerate), reason: ReasonOutOfMemory,
			message: "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824"},
		{name: "absurd quantity", pod: pod("1e99999999", "", tolerate), reason: ReasonOutOfCPU},
		{
			name: "init container larger than app", reason: ReasonOutOfCPU,
			pod: pod("100m", "", tolerate, func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}}}
			}),
		},
		{
			name: "node selector matches", pod: pod("", "", tolerate, func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
		},
		{
			name: "node selector does not match", reason: ReasonNodeAffinity, message: messageNodeAffinity,
			pod: pod("", "", tolerate, func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }),
		},
		{name: "affinity In", pod: pod("", "", tolerate, affinity(v1.NodeSelectorOpIn, "4", "5"))},
		{name: "affinity Gt", pod: pod("", "", tolerate, affinity(v1.NodeSelectorOpGt, "4"))},
		{name: "affinity NotIn", pod: pod("", "", tolerate, affinity(v1.NodeSelectorOpNotIn, "5")), reason: ReasonNodeAffinity},
		{name: "affinity DoesNotExist", pod: pod("", "", tolerate, affinity(v1.NodeSelectorOpDoesNotExist)), reason: ReasonNodeAffinity},
		{
			name: "untolerated NoExecute taint", pod: pod("", ""),
			reason: ReasonTaint, message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
		},
		{
			name: "static pods ignore taints",
			pod: pod("", "", func(p *v1.Pod) {
				p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
			}),
		},
		{
			name: "resources are checked before affinity", reason: ReasonOutOfMemory,
			pod: pod("", "2Gi", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Admit(tc.pod, node, tc.active)
			if got.Admit != (tc.reason == "") || got.Reason != tc.reason {
				t.Fatalf("Admit = %+v, want reason %q", got, tc.reason)
			}
			if tc.message != "" && got.Message != tc.message {
				t.Errorf("message %q, want %q", got.Message, tc.message)
			}
		})
	}
}
