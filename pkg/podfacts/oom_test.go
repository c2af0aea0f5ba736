package podfacts

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Cases follow upstream's pkg/kubelet/qos/policy_test.go (capacity 4000 bytes there; 10 GiB here keeps the
// arithmetic readable).
func TestContainerOOMScoreAdj(t *testing.T) {
	const capacity = int64(10 << 30)
	always := v1.ContainerRestartPolicyAlways
	guaranteed := pod(ctr(rl("1", "1Gi"), rl("1", "1Gi")))
	critical := pod(ctr(rl("1", "1Gi"), rl("1", "1Gi")))
	critical.Spec.PriorityClassName = SystemNodeCritical
	prio := int32(2000001000)
	critical.Spec.Priority = &prio
	criticalBurstable := pod(ctr(rl("", "1Gi"), nil))
	criticalBurstable.Spec.PriorityClassName = SystemNodeCritical
	criticalBurstable.Annotations = map[string]string{AnnotationConfigSource: SourceFile}
	mem := func(m string) v1.Container { return ctr(rl("", m), nil) }
	named := func(c v1.Container, n string) v1.Container { c.Name = n; return c }
	withSidecar := pod(named(mem("2Gi"), "a"), named(mem("4Gi"), "b"))
	side := named(mem("1Gi"), "s")
	side.RestartPolicy = &always
	withSidecar.Spec.InitContainers = []v1.Container{side}
	podLevel := pod(named(mem("1Gi"), "a"), named(mem("1Gi"), "b"))
	podLevel.Spec.Resources = &v1.ResourceRequirements{Requests: rl("", "4Gi")}

	tests := []struct {
		name     string
		pod      *v1.Pod
		init     bool // the container is InitContainers[0], else Containers[0]
		capacity int64
		want     int
	}{
		{"guaranteed", guaranteed, false, capacity, -997},
		{"besteffort", pod(ctr(nil, nil)), false, capacity, 1000},
		{"node critical", critical, false, capacity, -997},
		{"node critical static burstable", criticalBurstable, false, capacity, -997},
		{"burstable 10%", pod(mem("1Gi")), false, capacity, 900},
		{"burstable 50%", pod(mem("5Gi")), false, capacity, 500},
		{"burstable 99.9%+ clamps to 3", pod(mem("10Gi")), false, capacity, 3},
		{"burstable above capacity clamps to 3", pod(mem("20Gi")), false, capacity, 3},
		{"burstable without memory request is 999", pod(ctr(rl("1", ""), nil)), false, capacity, 999},
		{"burstable tiny request is 999", pod(mem("1Ki")), false, capacity, 999},
		{"zero capacity is 999", pod(mem("1Gi")), false, 0, 999},
		{"a sidecar scores no higher than the smallest regular container", withSidecar, true, capacity, 800},
		{"a pod-level request is shared among containers", podLevel, false, capacity, 800},
		{"absurd request", pod(mem("1e100")), false, capacity, 3},
	}
	for _, tt := range tests {
		c := &tt.pod.Spec.Containers[0]
		if tt.init {
			c = &tt.pod.Spec.InitContainers[0]
		}
		if got := ContainerOOMScoreAdj(tt.pod, c, tt.capacity); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

// Upstream's PodRequests cases: sidecars run beside the app containers and the init containers after them.
func TestPodRequests(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	side := func(req v1.ResourceList) v1.Container { c := ctr(req, nil); c.RestartPolicy = &always; return c }
	withInit := func(p *v1.Pod, init ...v1.Container) *v1.Pod { p.Spec.InitContainers = init; return p }
	tests := []struct {
		name string
		pod  *v1.Pod
		want Requests
	}{
		{"app containers add up", pod(ctr(rl("1", "1Gi"), nil), ctr(rl("500m", "1Gi"), nil)), Requests{1500, 2 << 30}},
		{"a larger init container wins", withInit(pod(ctr(rl("1", "1Gi"), nil)), ctr(rl("3", "512Mi"), nil)), Requests{3000, 1 << 30}},
		{"sidecars add to apps and to later inits", withInit(pod(ctr(rl("1", "1Gi"), nil)), side(rl("1", "1Gi")), ctr(rl("3", "512Mi"), nil)), Requests{4000, 2 << 30}},
		{"an init before a sidecar runs without it", withInit(pod(ctr(rl("1", "1Gi"), nil)), ctr(rl("3", "512Mi"), nil), side(rl("1", "1Gi"))), Requests{3000, 2 << 30}},
		{"overhead", func() *v1.Pod { p := pod(ctr(rl("1", "1Gi"), nil)); p.Spec.Overhead = rl("250m", "64Mi"); return p }(), Requests{1250, 1<<30 + 64<<20}},
		{"pod-level requests", func() *v1.Pod {
			p := pod(ctr(rl("1", "1Gi"), nil))
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("2", "")}
			return p
		}(), Requests{2000, 1 << 30}},
	}
	for _, tt := range tests {
		if got := PodRequests(tt.pod); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
