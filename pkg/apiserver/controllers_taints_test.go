package apiserver

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPressureTaints(t *testing.T) {
	t.Parallel()
	own := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{own}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue}, {Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse}}}}
	taints, changed := pressureTaints(n)
	if !changed || len(taints) != 2 || taints[0] != own || taints[1].Key != corev1.TaintNodeMemoryPressure || taints[1].Effect != corev1.TaintEffectNoSchedule {
		t.Fatalf("under memory pressure: %v %v", taints, changed)
	}
	n.Spec.Taints = taints
	if _, changed := pressureTaints(n); changed {
		t.Error("changed again with nothing new")
	}
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	if taints, changed := pressureTaints(n); !changed || len(taints) != 1 || taints[0] != own {
		t.Errorf("pressure gone: %v %v, want the node's own taint alone", taints, changed)
	}
}

// The control loop taints a node under pressure and untaints it after.
func TestPressureTaintsOnANode(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setDisk := func(s corev1.ConditionStatus) {
		t.Helper()
		n, err := ts.client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, {Type: corev1.NodeDiskPressure, Status: s}}
		if _, err := ts.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hasTaint := func() bool {
		n, _ := ts.client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == corev1.TaintNodeDiskPressure && t.Effect == corev1.TaintEffectNoSchedule
		})
	}
	setDisk(corev1.ConditionTrue)
	eventually(t, "disk-pressure taint", hasTaint)
	setDisk(corev1.ConditionFalse)
	eventually(t, "disk-pressure taint removed", func() bool { return !hasTaint() })
}
