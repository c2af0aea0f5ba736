package nodelifecycle

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestDisruption(t *testing.T) {
	// nodes makes ready Ready nodes then notReady ones (Unknown, False, or without a Ready condition) in zone.
	nodes := func(zone string, ready, notReady int) []*corev1.Node {
		var out []*corev1.Node
		for i := 0; i < ready+notReady; i++ {
			status := corev1.ConditionTrue
			if i >= ready {
				status = []corev1.ConditionStatus{corev1.ConditionUnknown, corev1.ConditionFalse, ""}[i%3]
			}
			n := node(status)
			n.Name = fmt.Sprintf("%s-%d", zone, i)
			if zone != "" {
				n.Labels = map[string]string{corev1.LabelTopologyZone: zone}
			}
			out = append(out, n)
		}
		return out
	}
	cat := func(ls ...[]*corev1.Node) []*corev1.Node {
		var out []*corev1.Node
		for _, l := range ls {
			out = append(out, l...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		all   bool
		want  NoExecute // for every node
	}{
		{"no nodes", nil, false, NoExecuteAdd},
		{"a standalone node, silent", nodes("", 0, 1), true, NoExecuteRemove},
		{"a standalone node, Ready", nodes("", 1, 0), false, NoExecuteAdd},
		{"one of three silent", nodes("", 2, 1), false, NoExecuteAdd},
		{"two of three silent: not more than two", nodes("", 1, 2), false, NoExecuteAdd},
		{"three of five silent: partial, small", nodes("", 2, 3), false, NoExecuteHold},
		{"three of six silent: under the threshold", nodes("", 3, 3), false, NoExecuteAdd},
		{"every node of one zone silent, another zone well", cat(nodes("a", 0, 2), nodes("b", 1, 0)), false, NoExecuteAdd},
		{"every node of every zone silent", cat(nodes("a", 0, 2), nodes("b", 0, 1)), true, NoExecuteRemove},
		{"a large zone partially disrupted keeps evicting", nodes("", 20, 31), false, NoExecuteAdd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, all := Disruption(tc.nodes)
			if all != tc.all {
				t.Errorf("all fully disrupted %v, want %v", all, tc.all)
			}
			for _, n := range tc.nodes {
				if got[n.Name] != tc.want {
					t.Errorf("node %s: %v, want %v", n.Name, got[n.Name], tc.want)
				}
			}
		})
	}
}

func TestZoneKey(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{corev1.LabelTopologyZone: "z1"}, ":\x00:z1"},
		{map[string]string{corev1.LabelTopologyRegion: "r", corev1.LabelTopologyZone: "z1"}, "r:\x00:z1"},
		{map[string]string{corev1.LabelFailureDomainBetaRegion: "r", corev1.LabelFailureDomainBetaZone: "z2"}, "r:\x00:z2"},
	} {
		n := &corev1.Node{}
		n.Labels = tc.labels
		if got := ZoneKey(n); got != tc.want {
			t.Errorf("ZoneKey(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
}
