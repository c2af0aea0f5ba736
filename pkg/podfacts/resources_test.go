package podfacts

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// list parses "cpu=100m,memory=1Gi" into a ResourceList; "" is nil.
func list(s string) v1.ResourceList {
	if s == "" {
		return nil
	}
	out := v1.ResourceList{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[v1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

// rctr builds a container with requests and limits in list's format.
func rctr(name, requests, limits string) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}}
}

// rsidecar builds a restartable init container.
func rsidecar(name, requests, limits string) v1.Container {
	c := rctr(name, requests, limits)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

type rpodOpt func(*v1.Pod)

func rinit(cs ...v1.Container) rpodOpt {
	return func(p *v1.Pod) { p.Spec.InitContainers = append(p.Spec.InitContainers, cs...) }
}

func rpodLevel(requests, limits string) rpodOpt {
	return func(p *v1.Pod) {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}
	}
}

func roverhead(s string) rpodOpt {
	return func(p *v1.Pod) { p.Spec.Overhead = list(s) }
}

func rpod(_ string, containers []v1.Container, opts ...rpodOpt) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: containers}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func assertList(t *testing.T, what string, got, want v1.ResourceList) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
		return
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g.Cmp(w) != 0 {
			t.Errorf("%s[%s] = %v, want %v", what, k, got[k], w.String())
		}
	}
}

func TestPodRequestsAndLimits(t *testing.T) {
	tests := []struct {
		name               string
		pod                *v1.Pod
		wantReqs, wantLims string
	}{
		{
			name:     "app containers add up",
			pod:      rpod("a", []v1.Container{rctr("a", "cpu=100m,memory=1Gi", "cpu=200m,memory=2Gi"), rctr("b", "cpu=300m", "cpu=1")}),
			wantReqs: "cpu=400m,memory=1Gi", wantLims: "cpu=1200m,memory=2Gi",
		},
		{
			name: "init container max wins over the sum",
			pod: rpod("a", []v1.Container{rctr("a", "cpu=100m", "cpu=100m"), rctr("b", "cpu=100m", "cpu=100m")},
				rinit(rctr("i1", "cpu=500m", "cpu=1"), rctr("i2", "cpu=150m", "cpu=150m"))),
			wantReqs: "cpu=500m", wantLims: "cpu=1",
		},
		{
			name: "sum wins over smaller init containers",
			pod: rpod("a", []v1.Container{rctr("a", "cpu=300m", ""), rctr("b", "cpu=300m", "")},
				rinit(rctr("i1", "cpu=500m", ""))),
			wantReqs: "cpu=600m",
		},
		{
			// KEP-753: sidecars run alongside; i2 needs itself plus s1.
			name: "sidecars add to app containers and to later init containers",
			pod: rpod("a", []v1.Container{rctr("a", "cpu=100m,memory=100Mi", "")},
				rinit(rctr("i1", "cpu=1", ""), rsidecar("s1", "cpu=200m,memory=50Mi", ""), rctr("i2", "cpu=900m", ""))),
			wantReqs: "cpu=1100m,memory=150Mi",
		},
		{
			name:     "overhead is added to requests and non-zero limits",
			pod:      rpod("a", []v1.Container{rctr("a", "cpu=100m,memory=100Mi", "cpu=200m")}, roverhead("cpu=10m,memory=10Mi")),
			wantReqs: "cpu=110m,memory=110Mi", wantLims: "cpu=210m",
		},
		{
			name: "pod-level resources replace the sums",
			pod: rpod("a", []v1.Container{rctr("a", "cpu=100m", "cpu=200m")},
				rpodLevel("cpu=1,memory=1Gi", "cpu=2,memory=2Gi")),
			wantReqs: "cpu=1,memory=1Gi", wantLims: "cpu=2,memory=2Gi",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertList(t, "requests", PodRequestList(tt.pod), list(tt.wantReqs))
			lims, _, _ := PodLimitList(tt.pod)
			assertList(t, "limits", lims, list(tt.wantLims))
		})
	}
}

// A pod's cgroup gets a memory limit only when every container's effective limit (a sidecar's with the
// sidecars before it, an init container's likewise) is set, or the pod sets one; the overhead is added.
func TestPodMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		name string
		pod  *v1.Pod
		want int64
	}{
		{name: "every container limited", pod: rpod("a", []v1.Container{rctr("a", "", "memory=100"), rctr("b", "", "memory=50")}), want: 150},
		{name: "one container unlimited", pod: rpod("a", []v1.Container{rctr("a", "", "memory=100"), rctr("b", "", "")})},
		{name: "sidecars add up, init containers alone", pod: rpod("a", []v1.Container{rctr("a", "", "memory=100")},
			rinit(rsidecar("s", "", "memory=30"), rctr("i", "", "memory=500"))), want: 530},
		{name: "an init container without its own limit runs under its sidecar's", pod: rpod("a", []v1.Container{rctr("a", "", "memory=100")},
			rinit(rsidecar("s", "", "memory=30"), rctr("i", "", ""))), want: 130},
		{name: "the pod-level limit wins", pod: rpod("a", []v1.Container{rctr("a", "", "")}, rpodLevel("", "memory=64")), want: 64},
		{name: "the overhead is added", pod: rpod("a", []v1.Container{rctr("a", "", "memory=100")}, roverhead("memory=10")), want: 110},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodMemoryLimit(tt.pod); got != tt.want {
				t.Errorf("PodMemoryLimit = %d, want %d", got, tt.want)
			}
		})
	}
}
