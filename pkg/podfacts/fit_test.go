package podfacts

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestUntoleratedTaint(t *testing.T) {
	taints := []v1.Taint{{Key: "a", Value: "1", Effect: v1.TaintEffectNoSchedule}, {Key: "b", Value: "2", Effect: v1.TaintEffectNoExecute}}
	tests := []struct {
		name   string
		tols   []v1.Toleration
		filter func(*v1.Taint) bool
		want   string
	}{
		{"none tolerated", nil, nil, "a"},
		{"NoExecute only", nil, NoExecute, "b"},
		{"tolerated by key and effect", []v1.Toleration{{Key: "b", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}, NoExecute, ""},
		{"tolerated by value", []v1.Toleration{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}, nil, ""},
		{"wrong value", []v1.Toleration{{Key: "b", Value: "3"}}, NoExecute, "b"},
		{"empty key with Exists tolerates all", []v1.Toleration{{Operator: v1.TolerationOpExists}}, nil, ""},
	}
	for _, tt := range tests {
		got, bad := UntoleratedTaint(taints, tt.tols, tt.filter)
		if bad && got.Key != tt.want || !bad && tt.want != "" {
			t.Errorf("%s: %v %v, want %q", tt.name, got, bad, tt.want)
		}
	}
}
