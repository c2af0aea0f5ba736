package podfacts

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1",
			Labels:      map[string]string{"app": "web", "tier": "front\nend"},
			Annotations: map[string]string{"a.example.com/x": "1"}},
		Spec: v1.PodSpec{ServiceAccountName: "sa", Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
		}}}},
	}
}

func TestFieldValue(t *testing.T) {
	n := NodeFacts{NodeName: "node1", HostIPs: []string{"192.0.2.1", "2001:db8::1"}, PodIPs: []string{"10.88.0.5"}}
	tests := []struct {
		path, want string
		err        bool
	}{
		{"metadata.name", "web", false},
		{"metadata.namespace", "ns", false},
		{"metadata.uid", "u1", false},
		{"metadata.labels", "app=\"web\"\ntier=\"front\\nend\"", false}, // upstream's FormatMap: sorted, quoted
		{"metadata.labels['app']", "web", false},
		{"metadata.labels['none']", "", false},
		{"metadata.annotations['a.example.com/x']", "1", false},
		{"metadata.annotations", "a.example.com/x=\"1\"", false},
		{"spec.nodeName", "node1", false},
		{"spec.serviceAccountName", "sa", false},
		{"status.hostIP", "192.0.2.1", false},
		{"status.hostIPs", "192.0.2.1,2001:db8::1", false},
		{"status.podIP", "10.88.0.5", false},
		{"status.podIPs", "10.88.0.5", false},
		{"spec.containers", "", true},
	}
	for _, tt := range tests {
		got, err := FieldValue(testPod(), tt.path, n)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("%s: %q %v, want %q (error %v)", tt.path, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, ErrDownwardAPI) {
			t.Errorf("%s: error %v is not ErrDownwardAPI", tt.path, err)
		}
	}
	host := testPod()
	host.Spec.HostNetwork = true
	if got, _ := FieldValue(host, "status.podIP", n); got != "192.0.2.1" {
		t.Errorf("host-network podIP %q", got)
	}
}

func TestResourceValue(t *testing.T) {
	n := NodeFacts{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}}
	q := resource.MustParse
	tests := []struct {
		resource string
		divisor  resource.Quantity
		want     string
		err      bool
	}{
		{"requests.cpu", resource.Quantity{}, "1", false}, // 250m rounds up to 1 core
		{"requests.cpu", q("1m"), "250", false},
		{"requests.memory", q("1Mi"), "64", false},
		{"limits.memory", resource.Quantity{}, "134217728", false},
		{"limits.cpu", q("1m"), "2000", false}, // unset: the node's allocatable
		{"limits.memory", q("1Gi"), "1", false},
		{"requests.ephemeral-storage", resource.Quantity{}, "0", false},
		{"capacity.cpu", resource.Quantity{}, "", true},
	}
	pod := testPod()
	for _, tt := range tests {
		got, err := ResourceValue(pod, &pod.Spec.Containers[0], &v1.ResourceFieldSelector{Resource: tt.resource, Divisor: tt.divisor}, n)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("%s / %s: %q %v, want %q", tt.resource, tt.divisor.String(), got, err, tt.want)
		}
	}
	if got, err := ResourceValue(pod, nil, &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory", Divisor: q("1Mi")}, n); err != nil || got != "128" {
		t.Errorf("by container name: %q %v", got, err)
	}
	if _, err := ResourceValue(pod, nil, &v1.ResourceFieldSelector{ContainerName: "db", Resource: "limits.memory"}, n); !errors.Is(err, ErrDownwardAPI) {
		t.Errorf("unknown container: %v", err)
	}
}

// Quantities with absurd exponents read fast and saturate.
func TestMilliValueSaturates(t *testing.T) {
	for _, s := range []string{"1e1000000000", "9e18", "-1e30"} {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			continue
		}
		if m := MilliValue(q); m != MaxMilli && m != -MaxMilli {
			t.Errorf("%s: %d, want saturated", s, m)
		}
	}
	if MilliValue(resource.MustParse("1500m")) != 1500 || Value(resource.MustParse("1500m")) != 2 {
		t.Error("ordinary values")
	}
	if AddSat(MaxMilli, 5) != MaxMilli || AddSat(-MaxMilli, -5) != -MaxMilli || AddSat(2, 3) != 5 {
		t.Error("AddSat")
	}
}
