package cgroups

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Cases follow upstream's pkg/apis/core/v1/helper/qos/qos_test.go.
func TestQOSClass(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"no containers", mkPod("a", nil), v1.PodQOSBestEffort},
		{"no resources", mkPod("a", []v1.Container{ctr("a", "", ""), ctr("b", "", "")}), v1.PodQOSBestEffort},
		{"only other resources", mkPod("a", []v1.Container{ctr("a", "nvidia.com/gpu=1", "nvidia.com/gpu=1")}), v1.PodQOSBestEffort},
		{"cpu and memory equal", mkPod("a", []v1.Container{
			ctr("a", "cpu=100m,memory=100Mi", "cpu=100m,memory=100Mi"),
			ctr("b", "cpu=100m,memory=100Mi", "cpu=100m,memory=100Mi"),
		}), v1.PodQOSGuaranteed},
		{"limits only (requests defaulted by the API are absent)", mkPod("a", []v1.Container{
			ctr("a", "", "cpu=100m,memory=100Mi"),
		}), v1.PodQOSBurstable},
		{"equal plus other resource", mkPod("a", []v1.Container{
			ctr("a", "cpu=100m,memory=100Mi,nvidia.com/gpu=2", "cpu=100m,memory=100Mi,nvidia.com/gpu=2"),
		}), v1.PodQOSGuaranteed},
		{"one guaranteed one besteffort", mkPod("a", []v1.Container{
			ctr("a", "cpu=100m,memory=100Mi", "cpu=100m,memory=100Mi"), ctr("b", "", ""),
		}), v1.PodQOSBurstable},
		{"cpu only", mkPod("a", []v1.Container{ctr("a", "cpu=100m", "cpu=100m")}), v1.PodQOSBurstable},
		{"request below limit", mkPod("a", []v1.Container{ctr("a", "cpu=100m,memory=100Mi", "cpu=200m,memory=100Mi")}), v1.PodQOSBurstable},
		{"memory request only", mkPod("a", []v1.Container{ctr("a", "memory=100Mi", "")}), v1.PodQOSBurstable},
		{"init container burstable", mkPod("a", []v1.Container{ctr("a", "cpu=100m,memory=100Mi", "cpu=100m,memory=100Mi")},
			withInit(ctr("init", "cpu=10m", ""))), v1.PodQOSBurstable},
		{"init container guaranteed", mkPod("a", []v1.Container{ctr("a", "cpu=100m,memory=100Mi", "cpu=100m,memory=100Mi")},
			withInit(ctr("init", "cpu=1,memory=1Gi", "cpu=1,memory=1Gi"))), v1.PodQOSGuaranteed},
		{"pod-level guaranteed", mkPod("a", []v1.Container{ctr("a", "", "")},
			withPodResources("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")), v1.PodQOSGuaranteed},
		{"pod-level burstable", mkPod("a", []v1.Container{ctr("a", "cpu=1,memory=1Gi", "cpu=1,memory=1Gi")},
			withPodResources("cpu=1", "cpu=2")), v1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QOSClass(tt.pod); got != tt.want {
				t.Errorf("QOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestQOSClassFromStatus(t *testing.T) {
	p := guaranteedPod("a")
	p.Status.QOSClass = v1.PodQOSBurstable
	if got := QOSClass(p); got != v1.PodQOSBurstable {
		t.Errorf("QOSClass = %s, want the status class Burstable", got)
	}
	if got := ComputeQOSClass(p); got != v1.PodQOSGuaranteed {
		t.Errorf("ComputeQOSClass = %s, want Guaranteed", got)
	}
}
