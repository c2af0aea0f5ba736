package allocation

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func rr(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	set := func(l v1.ResourceList, name v1.ResourceName, v string) {
		if v != "" {
			l[name] = resource.MustParse(v)
		}
	}
	set(r.Requests, v1.ResourceCPU, cpuReq)
	set(r.Limits, v1.ResourceCPU, cpuLim)
	set(r.Requests, v1.ResourceMemory, memReq)
	set(r.Limits, v1.ResourceMemory, memLim)
	return r
}

func podOf(rs ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	for i, r := range rs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return p
}

func TestInfeasible(t *testing.T) {
	node := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}
	static := podOf(rr("100m", "", "", ""))
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"fits", podOf(rr("1", "2", "512Mi", "1Gi")), ""},
		{"limits beyond the node are not requests", podOf(rr("1", "4", "", "")), ""},
		{"cpu", podOf(rr("1500m", "", "", ""), rr("1", "", "", "")), "Node didn't have enough capacity: cpu, requested: 2500, capacity: 2000"},
		{"memory first", podOf(rr("3", "", "2Gi", "")), "Node didn't have enough capacity: memory, requested: 2147483648, capacity: 1073741824"},
		{"static pods", static, "In-place resize of static-pods is not supported"},
	} {
		if got := Infeasible(tc.pod, node); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestUpperBound(t *testing.T) {
	alloc := podOf(rr("200m", "400m", "64Mi", "256Mi"))
	for _, tc := range []struct {
		name     string
		actuated map[string]v1.ResourceRequirements
		want     v1.ResourceRequirements
	}{
		{"unknown containers keep their allocation", nil, alloc.Spec.Containers[0].Resources},
		{"an increase is the allocation", map[string]v1.ResourceRequirements{"a": rr("100m", "200m", "64Mi", "128Mi")}, alloc.Spec.Containers[0].Resources},
		{"a decrease keeps what runs", map[string]v1.ResourceRequirements{"a": rr("300m", "800m", "64Mi", "128Mi")}, rr("300m", "800m", "64Mi", "256Mi")},
	} {
		got := UpperBound(alloc, tc.actuated).Spec.Containers[0].Resources
		if !CPUMemoryEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if UpperBound(alloc, nil) != alloc {
		t.Error("an unchanged pod was copied")
	}
	if milli(alloc.Spec.Containers[0].Resources.Limits) != 400 {
		t.Error("the allocated pod was changed")
	}
}

func TestRestartNeeded(t *testing.T) {
	c := &v1.Container{Name: "a", Resources: rr("200m", "", "64Mi", "256Mi"),
		ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer},
			{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired}}}
	if RestartNeeded(c, rr("100m", "", "64Mi", "256Mi")) {
		t.Error("a cpu change (NotRequired) restarts")
	}
	if !RestartNeeded(c, rr("200m", "", "64Mi", "128Mi")) {
		t.Error("a memory change (RestartContainer) does not restart")
	}
	c.ResizePolicy = nil
	if RestartNeeded(c, rr("200m", "", "64Mi", "128Mi")) {
		t.Error("no policy (NotRequired by default) restarts")
	}
}

func TestWithAllocated(t *testing.T) {
	pod := podOf(rr("200m", "", "", ""))
	if WithAllocated(pod, FromSpec(pod)) != pod {
		t.Error("an allocation equal to the spec copied the pod")
	}
	got := WithAllocated(pod, map[string]v1.ResourceRequirements{"a": rr("100m", "", "", "")})
	if got == pod || milli(got.Spec.Containers[0].Resources.Requests) != 100 || milli(pod.Spec.Containers[0].Resources.Requests) != 200 {
		t.Errorf("allocated pod %v, spec %v", got.Spec.Containers[0].Resources, pod.Spec.Containers[0].Resources)
	}
}

func TestStoreCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", CheckpointName)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetAllocated("u", map[string]v1.ResourceRequirements{"a": rr("1", "", "", "")}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetActuated("u", "a", rr("500m", "", "", "")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetActuated("unknown-pod", "a", rr("1", "", "", "")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := again.Allocated("u")
	act, _ := again.Actuated("u", "a")
	if !ok || milli(a["a"].Requests) != 1000 || milli(act.Requests) != 500 {
		t.Fatalf("reopened: %v %v %v", a, ok, act)
	}
	if _, ok := again.Allocated("unknown-pod"); ok {
		t.Error("an actuation without an allocation was kept")
	}
	if err := again.RemoveOrphans(map[types.UID]bool{}); err != nil {
		t.Fatal(err)
	}
	if err := again.Flush(); err != nil {
		t.Fatal(err)
	}
	if third, _ := Open(path); len(third.pods) != 0 {
		t.Errorf("orphans kept: %v", third.pods)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if bad, err := Open(path); err == nil || bad == nil || len(bad.pods) != 0 {
		t.Errorf("a corrupt checkpoint: %v %v", bad, err)
	}
}

func milli(l v1.ResourceList) int64 {
	q := l[v1.ResourceCPU]
	return q.MilliValue()
}
