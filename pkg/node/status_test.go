package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func readyStatus(status v1.ConditionStatus, heartbeat time.Time) *v1.NodeStatus {
	return &v1.NodeStatus{
		Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: status, LastHeartbeatTime: metav1.NewTime(heartbeat),
			LastTransitionTime: metav1.NewTime(t0)}},
	}
}

func TestNeedsPost(t *testing.T) {
	every := 5 * time.Minute
	tests := []struct {
		name     string
		old, cur *v1.NodeStatus
		lastPost time.Time
		now      time.Time
		want     bool
	}{
		{"unchanged, recent post", readyStatus("True", t0), readyStatus("True", t0.Add(10*time.Second)), t0, t0.Add(10 * time.Second), false},
		{"only heartbeat changed, 4m59s", readyStatus("True", t0), readyStatus("True", t0.Add(time.Minute)), t0, t0.Add(5*time.Minute - time.Second), false},
		{"unchanged, report period over", readyStatus("True", t0), readyStatus("True", t0), t0, t0.Add(5 * time.Minute), true},
		{"never posted", readyStatus("True", t0), readyStatus("True", t0), time.Time{}, t0, true},
		{"condition changed", readyStatus("True", t0), readyStatus("False", t0), t0, t0.Add(time.Second), true},
		{"capacity changed", readyStatus("True", t0), func() *v1.NodeStatus {
			s := readyStatus("True", t0)
			s.Capacity[v1.ResourceCPU] = resource.MustParse("4")
			return s
		}(), t0, t0.Add(time.Second), true},
		{"condition added", readyStatus("True", t0), func() *v1.NodeStatus {
			s := readyStatus("True", t0)
			s.Conditions = append(s.Conditions, v1.NodeCondition{Type: v1.NodeMemoryPressure, Status: "False"})
			return s
		}(), t0, t0.Add(time.Second), true},
		{"same conditions, other order", &v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: "A"}, {Type: "B"}}},
			&v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: "B"}, {Type: "A"}}}, t0, t0.Add(time.Second), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsPost(tt.old, tt.cur, tt.lastPost, tt.now, every); got != tt.want {
				t.Errorf("needsPost = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestApplyStatusTransitions(t *testing.T) {
	f := facts{now: t0, addresses: []v1.NodeAddress{{Type: v1.NodeHostName, Address: "n"}}, port: 10250,
		capacity: v1.ResourceList{"cpu": resource.MustParse("1")}, imagesKnown: true,
		images: []v1.ContainerImage{{Names: []string{"a"}, SizeBytes: 1}}}
	var st v1.NodeStatus
	st.Conditions = []v1.NodeCondition{{Type: "NetworkUnavailable", Status: v1.ConditionFalse}}
	got := applyStatus(&st, f)
	want := []transition{{reason: "NodeHasSufficientMemory"}, {reason: "NodeHasNoDiskPressure"},
		{reason: "NodeHasSufficientPID"}, {reason: "NodeReady"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("transitions = %v", got)
	}
	if n := len(st.Conditions); n != 5 || st.Conditions[n-1].Type != v1.NodeReady || st.Conditions[0].Type != "NetworkUnavailable" {
		t.Errorf("conditions = %v (Ready must stay last, others kept)", st.Conditions)
	}
	if st.DaemonEndpoints.KubeletEndpoint.Port != 10250 || len(st.Images) != 1 || len(st.Addresses) != 1 {
		t.Errorf("status = %+v", st)
	}

	f.now = t0.Add(10 * time.Second)
	f.failures = []error{errors.New("container runtime is down")}
	f.imagesKnown, f.images = false, nil
	got = applyStatus(&st, f)
	if !reflect.DeepEqual(got, []transition{{reason: "NodeNotReady", message: "container runtime is down"}}) {
		t.Errorf("transitions = %v", got)
	}
	if len(st.Images) != 1 {
		t.Errorf("unknown images must keep the listed ones: %v", st.Images)
	}
	r := conditionOf(&st, v1.NodeReady)
	if r.Status != v1.ConditionFalse || r.Reason != "KubeletNotReady" || !r.LastTransitionTime.Time.Equal(f.now) {
		t.Errorf("ready = %+v", r)
	}
}

func TestApplyStatusVolumesInUse(t *testing.T) {
	st := v1.NodeStatus{VolumesInUse: []v1.UniqueVolumeName{"set-by-someone"}}
	applyStatus(&st, facts{now: t0})
	if len(st.VolumesInUse) != 1 {
		t.Errorf("volumes in use not known: the listed ones must stay, got %v", st.VolumesInUse)
	}
	applyStatus(&st, facts{now: t0, volumesInUseKnown: true, volumesInUse: []v1.UniqueVolumeName{"kubernetes.io/csi/d^h"}})
	if fmt.Sprint(st.VolumesInUse) != "[kubernetes.io/csi/d^h]" {
		t.Errorf("volumes in use %v", st.VolumesInUse)
	}
	applyStatus(&st, facts{now: t0, volumesInUseKnown: true})
	if len(st.VolumesInUse) != 0 {
		t.Errorf("volumes in use after the last was torn down: %v", st.VolumesInUse)
	}
}

func TestStatusImages(t *testing.T) {
	var imgs []*runtimeapi.Image
	for i := 0; i < 60; i++ {
		imgs = append(imgs, &runtimeapi.Image{Id: string(rune('a' + i%26)), Size: uint64(i), RepoTags: []string{"t"}})
	}
	imgs = append(imgs,
		&runtimeapi.Image{Id: "big", Size: 1000, RepoDigests: []string{"d1", "d2"}, RepoTags: []string{"t1", "t2", "t3", "t4"}},
		&runtimeapi.Image{Id: "noname", Size: 2000})
	got := statusImages(imgs, MaxImages)
	if len(got) != MaxImages {
		t.Fatalf("len = %d", len(got))
	}
	if !reflect.DeepEqual(got[0].Names, []string{"d1", "d2", "t1", "t2", "t3"}) || got[0].SizeBytes != 1000 {
		t.Errorf("largest = %+v", got[0])
	}
	if got[1].SizeBytes != 59 || got[MaxImages-1].SizeBytes != 11 {
		t.Errorf("order: %d .. %d", got[1].SizeBytes, got[MaxImages-1].SizeBytes)
	}
}

func TestRuntimeVersion(t *testing.T) {
	if got := runtimeVersion(&runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.6.20"}); got != "containerd://1.6.20" {
		t.Errorf("got %q", got)
	}
	if got := runtimeVersion(nil); got != "" {
		t.Errorf("nil: got %q", got)
	}
}

func TestStatusPatch(t *testing.T) {
	old := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "5"},
		Spec: v1.NodeSpec{Unschedulable: true},
		Status: v1.NodeStatus{
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: "n"}},
			Conditions: []v1.NodeCondition{{Type: "NetworkUnavailable", Status: "False"},
				{Type: v1.NodeReady, Status: "False", Reason: "KubeletNotReady"}},
			Capacity: v1.ResourceList{"cpu": resource.MustParse("2"), "hugepages-1Gi": resource.MustParse("1Gi")},
		}}
	cur := old.DeepCopy()
	cur.Spec.Unschedulable = false // the spec is never patched
	cur.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.2"}, {Type: v1.NodeHostName, Address: "n"}}
	cur.Status.Conditions[1] = v1.NodeCondition{Type: v1.NodeReady, Status: "True", Reason: "KubeletReady"}
	cur.Status.Capacity = v1.ResourceList{"cpu": resource.MustParse("4")}
	patch, err := statusPatch(old, cur)
	if err != nil {
		t.Fatal(err)
	}
	oldJSON, _ := json.Marshal(old)
	outJSON, err := strategicpatch.StrategicMergePatch(oldJSON, patch, v1.Node{})
	if err != nil {
		t.Fatalf("apply %s: %v", patch, err)
	}
	var out v1.Node
	if err := json.Unmarshal(outJSON, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Spec.Unschedulable {
		t.Errorf("patch touched the spec: %s", patch)
	}
	if !reflect.DeepEqual(out.Status.Addresses, cur.Status.Addresses) {
		t.Errorf("addresses = %v (patch %s)", out.Status.Addresses, patch)
	}
	if len(out.Status.Conditions) != 2 || out.Status.Conditions[1].Status != "True" || out.Status.Conditions[0].Type != "NetworkUnavailable" {
		t.Errorf("conditions = %v", out.Status.Conditions)
	}
	if len(out.Status.Capacity) != 1 {
		t.Errorf("capacity = %v", out.Status.Capacity)
	}
}

func TestMissingDefaultLabels(t *testing.T) {
	want := defaultLabels("host-a")
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
	if got := missingDefaultLabels(n, want); !reflect.DeepEqual(got, want) {
		t.Errorf("all missing: %v", got)
	}
	n.Labels = map[string]string{}
	for k, v := range want {
		n.Labels[k] = v
	}
	n.Labels["extra"] = "x"
	if got := missingDefaultLabels(n, want); len(got) != 0 {
		t.Errorf("none missing: %v", got)
	}
	n.Labels[v1.LabelHostname] = "other"
	if got := missingDefaultLabels(n, want); !reflect.DeepEqual(got, map[string]string{v1.LabelHostname: "host-a"}) {
		t.Errorf("changed hostname: %v", got)
	}
}

func TestStreak(t *testing.T) {
	var s streak
	logged := []bool{s.fail(t0), s.fail(t0.Add(10 * time.Second)), s.fail(t0.Add(time.Minute)), s.fail(t0.Add(70 * time.Second))}
	if !reflect.DeepEqual(logged, []bool{true, false, true, false}) {
		t.Errorf("logged = %v", logged)
	}
	if n, since := s.succeed(); n != 4 || !since.Equal(t0) {
		t.Errorf("succeed = %d, %v", n, since)
	}
	if n, _ := s.succeed(); n != 0 {
		t.Errorf("second succeed = %d", n)
	}
}

func TestRuntimeHandlers(t *testing.T) {
	got := runtimeHandlers([]*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
		{Name: "kata"}})
	if len(got) != 2 || got[0].Name != "" || !*got[0].Features.RecursiveReadOnlyMounts || *got[0].Features.UserNamespaces ||
		got[1].Name != "kata" || *got[1].Features.RecursiveReadOnlyMounts {
		t.Errorf("runtime handlers %+v", got)
	}
	st := v1.NodeStatus{}
	applyStatus(&st, facts{now: t0, runtimeHandlers: got, runtimeHandlersKnown: true})
	if len(st.RuntimeHandlers) != 2 {
		t.Errorf("status runtimeHandlers %+v", st.RuntimeHandlers)
	}
	applyStatus(&st, facts{now: t0})
	if len(st.RuntimeHandlers) != 2 {
		t.Errorf("unknown handlers must keep the listed ones: %+v", st.RuntimeHandlers)
	}
}

func TestMergeResources(t *testing.T) {
	q := resource.MustParse
	own := v1.ResourceList{"cpu": q("2"), "example.com/gpu": q("2")}
	ownAlloc := v1.ResourceList{"cpu": q("1900m"), "example.com/gpu": q("1")}
	tests := []struct {
		name              string
		old               v1.ResourceList
		gone              []v1.ResourceName
		wantCap, wantAllc map[string]string
	}{
		{"fresh node", nil, nil,
			map[string]string{"cpu": "2", "example.com/gpu": "2"}, map[string]string{"cpu": "1900m", "example.com/gpu": "1"}},
		{"the kubelet's own values win", v1.ResourceList{"cpu": q("8"), "example.com/gpu": q("5")}, nil,
			map[string]string{"cpu": "2", "example.com/gpu": "2"}, map[string]string{"cpu": "1900m", "example.com/gpu": "1"}},
		{"an advertised extended resource stays, allocatable = capacity", v1.ResourceList{"cpu": q("2"), "example.com/dongle": q("3")}, nil,
			map[string]string{"cpu": "2", "example.com/gpu": "2", "example.com/dongle": "3"},
			map[string]string{"cpu": "1900m", "example.com/gpu": "1", "example.com/dongle": "3"}},
		{"a gone device plugin resource at zero", v1.ResourceList{"cpu": q("2"), "example.com/fpga": q("4")}, []v1.ResourceName{"example.com/fpga"},
			map[string]string{"cpu": "2", "example.com/gpu": "2", "example.com/fpga": "0"},
			map[string]string{"cpu": "1900m", "example.com/gpu": "1", "example.com/fpga": "0"}},
	}
	str := func(l v1.ResourceList) map[string]string {
		out := map[string]string{}
		for k, v := range l {
			out[string(k)] = v.String()
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, a := mergeResources(tt.old, own, ownAlloc, tt.gone)
			if !reflect.DeepEqual(str(c), tt.wantCap) || !reflect.DeepEqual(str(a), tt.wantAllc) {
				t.Errorf("capacity %v allocatable %v, want %v and %v", str(c), str(a), tt.wantCap, tt.wantAllc)
			}
		})
	}
	if own["example.com/dongle"] != (resource.Quantity{}) || len(own) != 2 {
		t.Errorf("the kubelet's list was modified: %v", own)
	}
}

func TestNodeFeatures(t *testing.T) {
	if nodeFeatures(nil) != nil {
		t.Error("a runtime reporting no features must leave the Node's")
	}
	st := v1.NodeStatus{}
	applyStatus(&st, facts{now: t0, features: nodeFeatures(&runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true})})
	if f := st.Features; f == nil || f.SupplementalGroupsPolicy == nil || !*f.SupplementalGroupsPolicy {
		t.Errorf("status.features %+v", st.Features)
	}
	applyStatus(&st, facts{now: t0})
	if st.Features == nil {
		t.Error("unknown features must keep the listed ones")
	}
	applyStatus(&st, facts{now: t0, features: nodeFeatures(&runtimeapi.RuntimeFeatures{})})
	if *st.Features.SupplementalGroupsPolicy {
		t.Errorf("a runtime without the feature: %+v", st.Features)
	}
}
