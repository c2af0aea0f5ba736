package podfacts

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestIsExtendedResource(t *testing.T) {
	for name, want := range map[v1.ResourceName]bool{
		"example.com/gpu": true, "nvidia.com/gpu": true, "cpu": false, "memory": false, "hugepages-2Mi": false,
		"kubernetes.io/batteries": false, "requests.example.com/gpu": false, "example.com/bad name": false,
	} {
		if got := IsExtendedResource(name); got != want {
			t.Errorf("IsExtendedResource(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestScalarShortfall(t *testing.T) {
	asking := func(list map[v1.ResourceName]string) *v1.Pod {
		req := v1.ResourceList{}
		for k, v := range list {
			req[k] = resource.MustParse(v)
		}
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: req}}}}}
	}
	node := v1.ResourceList{"example.com/dongle": resource.MustParse("4"), "hugepages-2Mi": resource.MustParse("8Mi")}
	for _, tc := range []struct {
		name          string
		pod           *v1.Pod
		active        []*v1.Pod
		ignoreUnknown bool
		want          string // the short resource, "" when it fits
		used          int64
	}{
		{name: "fits", pod: asking(map[v1.ResourceName]string{"example.com/dongle": "4"})},
		{name: "more than the node has", pod: asking(map[v1.ResourceName]string{"example.com/dongle": "5"}), want: "example.com/dongle"},
		{name: "the others hold it", pod: asking(map[v1.ResourceName]string{"example.com/dongle": "2"}),
			active: []*v1.Pod{asking(map[v1.ResourceName]string{"example.com/dongle": "3"})}, want: "example.com/dongle", used: 3},
		{name: "a resource the node does not list", pod: asking(map[v1.ResourceName]string{"example.com/gpu": "1"}), want: "example.com/gpu"},
		{name: "the kubelet leaves an unknown extended resource out", pod: asking(map[v1.ResourceName]string{"example.com/gpu": "1"}), ignoreUnknown: true},
		{name: "but not huge pages the node lacks", pod: asking(map[v1.ResourceName]string{"hugepages-1Gi": "1Gi"}), ignoreUnknown: true, want: "hugepages-1Gi"},
		{name: "huge pages beyond the node's", pod: asking(map[v1.ResourceName]string{"hugepages-2Mi": "10Mi"}), want: "hugepages-2Mi"},
		{name: "cpu and memory are not scalar", pod: asking(map[v1.ResourceName]string{"cpu": "100", "memory": "1Ti"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, short := ScalarShortfall(tc.pod, node, tc.active, tc.ignoreUnknown)
			if got := string(s.Name); short != (tc.want != "") || got != tc.want || s.Used != tc.used {
				t.Errorf("ScalarShortfall = %+v, %v; want %q short, used %d", s, short, tc.want, tc.used)
			}
		})
	}
}
