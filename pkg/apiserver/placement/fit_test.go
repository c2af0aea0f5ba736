package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, cpu, mem string, mod ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}}
	for _, m := range mod {
		m(n)
	}
	return n
}

func pod(cpu, mem string, mod ...func(*corev1.Pod)) *corev1.Pod {
	req := corev1.ResourceList{}
	if cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		req[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}}}
	for _, m := range mod {
		m(p)
	}
	return p
}

func TestChoose(t *testing.T) {
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	}
	tolerant := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x"}}
	}
	selector := func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "b"} }
	cases := []struct {
		name    string
		pod     *corev1.Pod
		nodes   []*corev1.Node
		bound   map[string][]*corev1.Pod
		want    string
		wantMsg string
	}{
		{"no nodes", pod("", ""), nil, nil, "", "0/0 nodes"},
		{"most free cpu", pod("100m", ""), []*corev1.Node{node("a", "1", "1Gi"), node("b", "2", "1Gi")}, nil, "b", ""},
		{"not ready", pod("", ""), []*corev1.Node{node("a", "1", "1Gi", notReady)}, nil, "", ReasonNotReady},
		{"cpu", pod("2", ""), []*corev1.Node{node("a", "1", "1Gi")}, nil, "", ReasonCPU},
		{"memory", pod("", "2Gi"), []*corev1.Node{node("a", "1", "1Gi")}, nil, "", ReasonMemory},
		{"used cpu", pod("600m", ""), []*corev1.Node{node("a", "1", "1Gi")},
			map[string][]*corev1.Pod{"a": {pod("500m", "")}}, "", ReasonCPU},
		{"terminal pods free their requests", pod("600m", ""), []*corev1.Node{node("a", "1", "1Gi")},
			map[string][]*corev1.Pod{"a": {pod("500m", "", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}}, "a", ""},
		{"selector", pod("", "", selector), []*corev1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")}, nil, "b", ""},
		{"selector unmatched", pod("", "", selector), []*corev1.Node{node("a", "1", "1Gi")}, nil, "", ReasonSelector},
		{"taint", pod("", ""), []*corev1.Node{node("a", "1", "1Gi", tainted)}, nil, "", ReasonTaint},
		{"toleration", pod("", "", tolerant), []*corev1.Node{node("a", "1", "1Gi", tainted)}, nil, "a", ""},
		{"unschedulable", pod("", ""), []*corev1.Node{node("a", "1", "1Gi", func(n *corev1.Node) { n.Spec.Unschedulable = true })},
			nil, "", ReasonUnschedulable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, msg := Choose(c.pod, c.nodes, c.bound)
			if got != c.want {
				t.Errorf("node %q, want %q (%s)", got, c.want, msg)
			}
			if !strings.Contains(msg, c.wantMsg) {
				t.Errorf("message %q does not contain %q", msg, c.wantMsg)
			}
		})
	}
}

// Pods without requests spread across equal nodes; a node with more free allocatable takes more of them.
func TestSpread(t *testing.T) {
	nodes := []*corev1.Node{node("a", "2", "4Gi"), node("b", "2", "4Gi"), node("c", "2", "4Gi")}
	bound := map[string][]*corev1.Pod{}
	var order []string
	for i := 0; i < 6; i++ {
		p := pod("", "")
		n, msg := Choose(p, nodes, bound)
		if n == "" {
			t.Fatal(msg)
		}
		bound[n] = append(bound[n], p)
		order = append(order, n)
	}
	if got := strings.Join(order, ""); got != "abcabc" {
		t.Fatalf("placement order %q, want abcabc", got)
	}
	// A bigger node takes pods until its free share falls to the others'.
	big := []*corev1.Node{node("a", "1", "1Gi"), node("z", "4", "4Gi")}
	bound = map[string][]*corev1.Pod{}
	counts := map[string]int{}
	for i := 0; i < 5; i++ {
		p := pod("", "")
		n, _ := Choose(p, big, bound)
		bound[n] = append(bound[n], p)
		counts[n]++
	}
	if counts["z"] != 4 || counts["a"] != 1 {
		t.Fatalf("pods per node %v, want 4 on the bigger node and 1 on the small one", counts)
	}
}
