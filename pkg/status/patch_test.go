package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The kubelet's own conditions (PodScheduled among them, as upstream's PodConditionsByKubelet) replace the
// API's; others' (a readiness gate's) stay; DisruptionTarget, which the kubelet shares with others, is the
// kubelet's when it sets one and the API's otherwise.
func TestMergeStatusConditions(t *testing.T) {
	api := v1.PodStatus{Conditions: []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, Reason: "by-scheduler"},
		{Type: v1.PodReady, Status: v1.ConditionTrue},
		{Type: "example.com/load-balancer", Status: v1.ConditionTrue, Reason: "by-controller"},
		{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "PreemptionByScheduler"},
	}}
	ours := v1.PodStatus{Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionFalse},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, Reason: "by-kubelet"},
		{Type: "example.com/load-balancer", Status: v1.ConditionFalse}, // not the kubelet's to write
	}}
	got := MergeStatus(api, ours)
	want := map[v1.PodConditionType]string{v1.PodScheduled: "by-kubelet", v1.PodReady: "False",
		"example.com/load-balancer": "by-controller", v1.DisruptionTarget: "PreemptionByScheduler"}
	check := func() {
		t.Helper()
		if len(got.Conditions) != len(want) {
			t.Fatalf("conditions %+v", got.Conditions)
		}
		for _, c := range got.Conditions {
			if w := want[c.Type]; w != string(c.Status) && w != c.Reason {
				t.Errorf("%s: %s %s, want %s", c.Type, c.Status, c.Reason, w)
			}
		}
	}
	check()
	ours.Conditions = append(ours.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet})
	got = MergeStatus(api, ours)
	want[v1.DisruptionTarget] = v1.PodReasonTerminationByKubelet
	check()
	api.Conditions = api.Conditions[:3]
	got = MergeStatus(api, ours)
	check()
}
