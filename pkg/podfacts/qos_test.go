package podfacts

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(cpu, mem string) v1.ResourceList {
	out := v1.ResourceList{}
	if cpu != "" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func ctr(req, lim v1.ResourceList) v1.Container {
	return v1.Container{Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func pod(containers ...v1.Container) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: containers}}
}

// Upstream's cases (pkg/apis/core/v1/helper/qos/qos_test.go TestComputePodQOS).
func TestComputeQOSClass(t *testing.T) {
	withInit := func(init v1.Container, c ...v1.Container) *v1.Pod {
		p := pod(c...)
		p.Spec.InitContainers = []v1.Container{init}
		return p
	}
	withPod := func(req, lim v1.ResourceList, c ...v1.Container) *v1.Pod {
		p := pod(c...)
		p.Spec.Resources = &v1.ResourceRequirements{Requests: req, Limits: lim}
		return p
	}
	huge := func(l v1.ResourceList) v1.ResourceList { l["hugepages-2Mi"] = resource.MustParse("1Gi"); return l }
	tests := []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"guaranteed", pod(ctr(rl("100m", "100Mi"), rl("100m", "100Mi"))), v1.PodQOSGuaranteed},
		{"guaranteed-guaranteed", pod(ctr(rl("100m", "100Mi"), rl("100m", "100Mi")), ctr(rl("100m", "100Mi"), rl("100m", "100Mi"))), v1.PodQOSGuaranteed},
		{"best-effort-best-effort", pod(ctr(rl("", ""), rl("", "")), ctr(rl("", ""), rl("", ""))), v1.PodQOSBestEffort},
		{"best-effort", pod(ctr(rl("", ""), rl("", ""))), v1.PodQOSBestEffort},
		{"best-effort-burstable", pod(ctr(rl("", ""), rl("", "")), ctr(rl("1", ""), rl("2", ""))), v1.PodQOSBurstable},
		{"best-effort-guaranteed", pod(ctr(rl("", ""), rl("", "")), ctr(rl("10m", "100Mi"), rl("10m", "100Mi"))), v1.PodQOSBurstable},
		{"burstable-cpu-guaranteed-memory", pod(ctr(rl("", "100Mi"), rl("", "100Mi"))), v1.PodQOSBurstable},
		{"burstable-no-limits", pod(ctr(rl("100m", "100Mi"), rl("", ""))), v1.PodQOSBurstable},
		{"burstable-guaranteed", pod(ctr(rl("1", "100Mi"), rl("2", "100Mi")), ctr(rl("100m", "100Mi"), rl("100m", "100Mi"))), v1.PodQOSBurstable},
		{"burstable-unbounded-but-requests-match-limits", pod(ctr(rl("100m", "100Mi"), rl("200m", "200Mi")), ctr(rl("100m", "100Mi"), rl("", ""))), v1.PodQOSBurstable},
		{"burstable-1", pod(ctr(rl("10m", "100Mi"), rl("100m", "200Mi"))), v1.PodQOSBurstable},
		{"burstable-2", pod(ctr(rl("0", "0"), rl("100m", "200Mi"))), v1.PodQOSBurstable},
		{"best-effort-hugepages", pod(ctr(huge(rl("0", "0")), huge(rl("0", "0")))), v1.PodQOSBestEffort},
		{"init-container", withInit(ctr(rl("10m", "100Mi"), rl("100m", "200Mi")), ctr(rl("", ""), rl("", ""))), v1.PodQOSBurstable},
		{"guaranteed-with-pod-level-resources", withPod(rl("10m", "100Mi"), rl("10m", "100Mi"), ctr(rl("", ""), rl("", ""))), v1.PodQOSGuaranteed},
		{"guaranteed-with-pod-and-container-level-resources", withPod(rl("10m", "100Mi"), rl("10m", "100Mi"), ctr(rl("3m", "10Mi"), rl("5m", "20Mi"))), v1.PodQOSGuaranteed},
		{"burstable-with-pod-level-resources", withPod(rl("10m", "10Mi"), rl("20m", "50Mi"), ctr(rl("", ""), rl("", ""))), v1.PodQOSBurstable},
		{"burstable-with-pod-and-container-level-resources", withPod(rl("10m", "10Mi"), rl("20m", "50Mi"), ctr(rl("5m", "10Mi"), rl("5m", "10Mi"))), v1.PodQOSBurstable},
		{"burstable-with-pod-and-container-level-requests", withPod(rl("10m", "10Mi"), rl("", ""), ctr(rl("5m", "10Mi"), rl("", ""))), v1.PodQOSBurstable},
		{"burstable-with-pod-and-container-level-resources-2", withPod(rl("10m", "10Mi"), rl("5m", ""), ctr(rl("5m", "10Mi"), rl("", "")), ctr(rl("5m", "10Mi"), rl("5m", "10Mi"))), v1.PodQOSBurstable},
		// Sums, not containers, are compared, as upstream compares them.
		{"sums equal across containers", pod(ctr(rl("1", "1Gi"), rl("2", "1Gi")), ctr(rl("3", "1Gi"), rl("2", "1Gi"))), v1.PodQOSGuaranteed},
		{"absurd quantities", pod(ctr(rl("1e100", "1e100"), rl("1e100", "1e100"))), v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		if got := ComputeQOSClass(tt.pod); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
	p := pod()
	p.Status.QOSClass = v1.PodQOSGuaranteed
	if QOSClass(p) != v1.PodQOSGuaranteed {
		t.Error("the class in the status does not win")
	}
}
