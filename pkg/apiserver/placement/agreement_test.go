package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/admission"
)

// The API server's placement and the kubelet's admission decide "does this pod fit this node" with the same
// functions (podfacts): every case here goes through both. They agree on node selectors and affinity (every
// operator; cases after upstream's component-helpers nodeaffinity tests), NoExecute taints and resources (with
// sidecars counted as upstream; extended resources and huge pages). Taints without NoExecute are placement's
// alone, as upstream's kubelet checks only NoExecute: placement refuses a NoSchedule taint the kubelet would
// admit; so is an extended resource the node does not list. A pod that placement binds is
// always admitted.
func TestPlacementAndAdmissionAgree(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	ext := func(name corev1.ResourceName, n string) corev1.ResourceRequirements {
		l := corev1.ResourceList{name: resource.MustParse(n)}
		return corev1.ResourceRequirements{Requests: l, Limits: l}
	}
	pod := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	affinity := func(terms ...corev1.NodeSelectorTerm) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	expr := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	field := func(op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: op, Values: values}}}
	}
	tolerate := func(tols ...corev1.Toleration) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Tolerations = tols }
	}
	taint := func(key string, effect corev1.TaintEffect) []corev1.Taint {
		return []corev1.Taint{{Key: key, Value: "v", Effect: effect}}
	}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		taints    []corev1.Taint
		placed    bool // placement binds it to the node
		admitted  bool // the kubelet admits it
		admitWhat string
	}{
		{"no constraints", pod(nil), nil, true, true, ""},
		{"nodeSelector matches", pod(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }), nil, true, true, ""},
		{"nodeSelector value differs", pod(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }), nil, false, false, admission.ReasonNodeAffinity},
		{"nodeSelector label missing", pod(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"gpu": "yes"} }), nil, false, false, admission.ReasonNodeAffinity},
		{"In matches", pod(affinity(expr("zone", corev1.NodeSelectorOpIn, "a", "b"))), nil, true, true, ""},
		{"In does not", pod(affinity(expr("zone", corev1.NodeSelectorOpIn, "c"))), nil, false, false, admission.ReasonNodeAffinity},
		{"NotIn with the label's value", pod(affinity(expr("zone", corev1.NodeSelectorOpNotIn, "a"))), nil, false, false, admission.ReasonNodeAffinity},
		{"NotIn without the label", pod(affinity(expr("gpu", corev1.NodeSelectorOpNotIn, "yes"))), nil, true, true, ""},
		{"Exists", pod(affinity(expr("disk", corev1.NodeSelectorOpExists))), nil, true, true, ""},
		{"Exists, missing", pod(affinity(expr("gpu", corev1.NodeSelectorOpExists))), nil, false, false, admission.ReasonNodeAffinity},
		{"DoesNotExist", pod(affinity(expr("gpu", corev1.NodeSelectorOpDoesNotExist))), nil, true, true, ""},
		{"DoesNotExist, present", pod(affinity(expr("disk", corev1.NodeSelectorOpDoesNotExist))), nil, false, false, admission.ReasonNodeAffinity},
		{"Gt", pod(affinity(expr("cores", corev1.NodeSelectorOpGt, "8"))), nil, true, true, ""},
		{"Gt, not greater", pod(affinity(expr("cores", corev1.NodeSelectorOpGt, "16"))), nil, false, false, admission.ReasonNodeAffinity},
		{"Lt", pod(affinity(expr("cores", corev1.NodeSelectorOpLt, "32"))), nil, true, true, ""},
		{"Gt against a label that is not a number", pod(affinity(expr("disk", corev1.NodeSelectorOpGt, "1"))), nil, false, false, admission.ReasonNodeAffinity},
		{"terms are ORed", pod(affinity(expr("zone", corev1.NodeSelectorOpIn, "c"), expr("disk", corev1.NodeSelectorOpExists))), nil, true, true, ""},
		{"expressions of a term are ANDed", pod(affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}, {Key: "gpu", Operator: corev1.NodeSelectorOpExists}}})), nil, false, false, admission.ReasonNodeAffinity},
		{"no terms match no node", pod(affinity()), nil, false, false, admission.ReasonNodeAffinity},
		{"an empty term matches no node", pod(affinity(corev1.NodeSelectorTerm{})), nil, false, false, admission.ReasonNodeAffinity},
		{"metadata.name In", pod(affinity(field(corev1.NodeSelectorOpIn, "n1"))), nil, true, true, ""},
		{"metadata.name NotIn", pod(affinity(field(corev1.NodeSelectorOpNotIn, "n1"))), nil, false, false, admission.ReasonNodeAffinity},
		{"NoExecute not tolerated", pod(nil), taint("evict", corev1.TaintEffectNoExecute), false, false, admission.ReasonTaint},
		{"NoExecute tolerated by key", pod(tolerate(corev1.Toleration{Key: "evict", Operator: corev1.TolerationOpExists})), taint("evict", corev1.TaintEffectNoExecute), true, true, ""},
		{"NoExecute tolerated by value", pod(tolerate(corev1.Toleration{Key: "evict", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoExecute})), taint("evict", corev1.TaintEffectNoExecute), true, true, ""},
		{"NoExecute, toleration of another effect", pod(tolerate(corev1.Toleration{Key: "evict", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})), taint("evict", corev1.TaintEffectNoExecute), false, false, admission.ReasonTaint},
		{"everything tolerated", pod(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})), taint("evict", corev1.TaintEffectNoExecute), true, true, ""},
		{"NoSchedule: placement's alone", pod(nil), taint("dedicated", corev1.TaintEffectNoSchedule), false, true, ""},
		{"PreferNoSchedule only scores", pod(nil), taint("soft", corev1.TaintEffectPreferNoSchedule), true, true, ""},
		{"fits the CPU", pod(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = req("1") }), nil, true, true, ""},
		{"too much CPU", pod(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = req("3") }), nil, false, false, admission.ReasonOutOfCPU},
		{"a sidecar counts beside the app", pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = req("1")
			p.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: req("1500m")}}
		}), nil, false, false, admission.ReasonOutOfCPU},
		{"a large init container counts", pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: req("2500m")}}
		}), nil, false, false, admission.ReasonOutOfCPU},
		{"the node's extended resource", pod(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = ext("example.com/dongle", "2") }), nil, true, true, ""},
		{"more of it than the node has", pod(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = ext("example.com/dongle", "3") }),
			nil, false, false, "OutOfexample.com/dongle"},
		// As upstream: the scheduler finds no node with it; a kubelet admits a pod bound to it anyway (a
		// cluster-level resource no node lists).
		{"an extended resource the node does not list: placement's alone", pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = ext("example.com/gpu", "1")
		}), nil, false, true, ""},
		{"huge pages the node does not have", pod(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = ext("hugepages-2Mi", "4Mi") }),
			nil, false, false, "OutOfhugepages-2Mi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"disk": "ssd", "zone": "a", "cores": "16"}},
				Spec:       corev1.NodeSpec{Taints: tt.taints},
				Status: corev1.NodeStatus{
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
						corev1.ResourcePods: resource.MustParse("110"), "example.com/dongle": resource.MustParse("2")},
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				},
			}
			reason := Fits(tt.pod, node, nil)
			res := admission.Admit(tt.pod, admission.Node{Name: node.Name, Labels: node.Labels, Taints: node.Spec.Taints,
				Allocatable: node.Status.Allocatable, MaxPods: 110}, nil)
			if (reason == "") != tt.placed {
				t.Errorf("placement: %q, want placed %v", reason, tt.placed)
			}
			if res.Admit != tt.admitted || !res.Admit && res.Reason != tt.admitWhat {
				t.Errorf("admission: %+v, want admitted %v (%s)", res, tt.admitted, tt.admitWhat)
			}
			if reason == "" && !res.Admit {
				t.Errorf("placement binds a pod the kubelet rejects: %+v", res)
			}
		})
	}
}
