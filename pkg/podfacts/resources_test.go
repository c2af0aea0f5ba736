package podfacts

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// res is a resource list from name, amount pairs.
func res(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// sidecarOf is c as a restartable init container.
func sidecarOf(c v1.Container) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

// format writes a list as "cpu=400m,memory=1Gi", names sorted.
func format(l v1.ResourceList) string {
	var out []string
	for name, q := range l {
		out = append(out, string(name)+"="+q.String())
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// Upstream's PodRequests and PodLimits (component-helpers), every resource.
func TestPodRequestAndLimitLists(t *testing.T) {
	none := v1.ResourceList(nil)
	tests := []struct {
		name               string
		spec               v1.PodSpec
		wantReqs, wantLims string
	}{
		{
			name:     "app containers add up",
			spec:     v1.PodSpec{Containers: []v1.Container{ctr(res("cpu", "100m", "memory", "1Gi"), res("cpu", "200m", "memory", "2Gi")), ctr(res("cpu", "300m"), res("cpu", "1"))}},
			wantReqs: "cpu=400m,memory=1Gi", wantLims: "cpu=1200m,memory=2Gi",
		},
		{
			name: "init container max wins over the sum",
			spec: v1.PodSpec{Containers: []v1.Container{ctr(res("cpu", "100m"), res("cpu", "100m")), ctr(res("cpu", "100m"), res("cpu", "100m"))},
				InitContainers: []v1.Container{ctr(res("cpu", "500m"), res("cpu", "1")), ctr(res("cpu", "150m"), res("cpu", "150m"))}},
			wantReqs: "cpu=500m", wantLims: "cpu=1",
		},
		{
			name: "sum wins over smaller init containers",
			spec: v1.PodSpec{Containers: []v1.Container{ctr(res("cpu", "300m"), none), ctr(res("cpu", "300m"), none)},
				InitContainers: []v1.Container{ctr(res("cpu", "500m"), none)}},
			wantReqs: "cpu=600m",
		},
		{
			// KEP-753: sidecars run alongside; the second init container needs itself plus the sidecar.
			name: "sidecars add to app containers and to later init containers",
			spec: v1.PodSpec{Containers: []v1.Container{ctr(res("cpu", "100m", "memory", "100Mi"), none)},
				InitContainers: []v1.Container{ctr(res("cpu", "1"), none), sidecarOf(ctr(res("cpu", "200m", "memory", "50Mi"), none)), ctr(res("cpu", "900m"), none)}},
			wantReqs: "cpu=1100m,memory=150Mi",
		},
		{
			name: "a sidecar's ephemeral storage adds up too",
			spec: v1.PodSpec{Containers: []v1.Container{ctr(res("ephemeral-storage", "1Gi"), res("ephemeral-storage", "2Gi"))},
				InitContainers: []v1.Container{sidecarOf(ctr(res("ephemeral-storage", "512Mi"), res("ephemeral-storage", "1Gi")))}},
			wantReqs: "ephemeral-storage=1536Mi", wantLims: "ephemeral-storage=3Gi",
		},
		{
			name:     "overhead is added to requests and non-zero limits",
			spec:     v1.PodSpec{Containers: []v1.Container{ctr(res("cpu", "100m", "memory", "100Mi"), res("cpu", "200m"))}, Overhead: res("cpu", "10m", "memory", "10Mi")},
			wantReqs: "cpu=110m,memory=110Mi", wantLims: "cpu=210m",
		},
		{
			name: "pod-level resources replace the sums of CPU, memory and huge pages only",
			spec: v1.PodSpec{Containers: []v1.Container{ctr(res("cpu", "100m", "ephemeral-storage", "1Gi"), res("cpu", "200m"))},
				Resources: &v1.ResourceRequirements{Requests: res("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "4Mi", "ephemeral-storage", "5Gi"),
					Limits: res("cpu", "2", "memory", "2Gi")}},
			wantReqs: "cpu=1,ephemeral-storage=1Gi,hugepages-2Mi=4Mi,memory=1Gi", wantLims: "cpu=2,memory=2Gi",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: tt.spec}
			if got := format(PodRequestList(pod)); got != tt.wantReqs {
				t.Errorf("requests %s, want %s", got, tt.wantReqs)
			}
			if lims, _, _ := PodLimitList(pod); format(lims) != tt.wantLims {
				t.Errorf("limits %s, want %s", format(lims), tt.wantLims)
			}
		})
	}
}

// A pod's cgroup gets a memory limit only when every container's effective limit (a sidecar's with the
// sidecars before it, an init container's likewise) is set, or the pod sets one; the overhead is added.
func TestPodMemoryLimit(t *testing.T) {
	mem := func(q string) v1.ResourceList { return res("memory", q) }
	none := v1.ResourceList(nil)
	for _, tt := range []struct {
		name string
		spec v1.PodSpec
		want int64
	}{
		{name: "every container limited", spec: v1.PodSpec{Containers: []v1.Container{ctr(none, mem("100")), ctr(none, mem("50"))}}, want: 150},
		{name: "one container unlimited", spec: v1.PodSpec{Containers: []v1.Container{ctr(none, mem("100")), ctr(none, none)}}},
		{name: "sidecars add up, init containers alone", spec: v1.PodSpec{Containers: []v1.Container{ctr(none, mem("100"))},
			InitContainers: []v1.Container{sidecarOf(ctr(none, mem("30"))), ctr(none, mem("500"))}}, want: 530},
		{name: "an init container without its own limit runs under its sidecar's", spec: v1.PodSpec{Containers: []v1.Container{ctr(none, mem("100"))},
			InitContainers: []v1.Container{sidecarOf(ctr(none, mem("30"))), ctr(none, none)}}, want: 130},
		{name: "the pod-level limit wins", spec: v1.PodSpec{Containers: []v1.Container{ctr(none, none)},
			Resources: &v1.ResourceRequirements{Limits: mem("64")}}, want: 64},
		{name: "the overhead is added", spec: v1.PodSpec{Containers: []v1.Container{ctr(none, mem("100"))}, Overhead: mem("10")}, want: 110},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodMemoryLimit(&v1.Pod{Spec: tt.spec}); got != tt.want {
				t.Errorf("PodMemoryLimit = %d, want %d", got, tt.want)
			}
		})
	}
}
