package cgroups

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestValidatePodResources(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		wantErr string // substring; "" means valid
	}{
		{"guaranteed", guaranteedPod("a"), ""},
		{"besteffort", bestEffortPod("a"), ""},
		{"zero limits mean none", mkPod("a", []v1.Container{ctr("a", "cpu=1,memory=1Gi", "cpu=0,memory=0")}), ""},
		{"fractional cpu", mkPod("a", []v1.Container{ctr("a", "cpu=0.5", "cpu=1.5")}), ""},
		{"other resources are not checked", mkPod("a", []v1.Container{ctr("a", "example.com/x=5", "example.com/x=1")}), ""},
		{"huge pages", mkPod("a", []v1.Container{ctr("a", "hugepages-2Mi=4Mi", "hugepages-2Mi=4Mi")}), ""},
		{"cpu request above limit", mkPod("a", []v1.Container{ctr("web", "cpu=2", "cpu=1")}),
			`container "web": cpu request 2 exceeds its limit 1`},
		{"memory request above limit in init container", mkPod("a", nil, withInit(ctr("init", "memory=2Gi", "memory=1Gi"))),
			`init container "init": memory request 2Gi exceeds its limit 1Gi`},
		{"negative memory", mkPod("a", []v1.Container{ctr("a", "memory=-1", "")}), "must not be negative"},
		{"huge cpu", mkPod("a", []v1.Container{ctr("a", "cpu=1e7", "")}), "exceeds the largest supported value"},
		{"huge memory", mkPod("a", []v1.Container{ctr("a", "", "memory=10Ei")}), "exceeds the largest supported value"},
		{"huge page request differs from limit", mkPod("a", []v1.Container{ctr("a", "hugepages-2Mi=2Mi", "hugepages-2Mi=4Mi")}),
			"must equal its limit"},
		{"partial huge page", mkPod("a", []v1.Container{ctr("a", "hugepages-2Mi=3Mi", "hugepages-2Mi=3Mi")}),
			"not a whole number of pages"},
		{"bad huge page size", mkPod("a", []v1.Container{ctr("a", "hugepages-x=3Mi", "")}), "invalid huge page size"},
		{"pod-level request above limit", mkPod("a", []v1.Container{ctr("a", "", "")}, withPodResources("cpu=2", "cpu=1")),
			"pod resources: cpu request 2 exceeds its limit 1"},
		{"negative overhead", mkPod("a", []v1.Container{ctr("a", "", "")}, withOverhead("memory=-5Mi")),
			"pod overhead: memory -5Mi must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidatePodResources(tt.pod)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("ValidatePodResources = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ValidatePodResources = %v, want error containing %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidResources) {
				t.Errorf("error %v does not wrap ErrInvalidResources", err)
			}
		})
	}
}
