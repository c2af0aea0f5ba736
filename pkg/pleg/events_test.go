package pleg

import (
	"reflect"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestComputeEvents(t *testing.T) {
	tests := []struct {
		name     string
		old, cur Snapshot
		want     []Event
	}{
		{"nothing", Snapshot{}, Snapshot{}, nil},
		{"unchanged", Snapshot{"a": {"c1": StateRunning}}, Snapshot{"a": {"c1": StateRunning}}, nil},
		{
			"new pod running",
			Snapshot{},
			Snapshot{"a": {"s1": StateRunning, "c1": StateRunning}},
			[]Event{{"a", ContainerStarted, "c1"}, {"a", ContainerStarted, "s1"}},
		},
		{"container exits", Snapshot{"a": {"c1": StateRunning}}, Snapshot{"a": {"c1": StateExited}}, []Event{{"a", ContainerDied, "c1"}}},
		{"exited container removed", Snapshot{"a": {"c1": StateExited}}, Snapshot{"a": {}}, []Event{{"a", ContainerRemoved, "c1"}}},
		{
			"running container vanishes",
			Snapshot{"a": {"c1": StateRunning}},
			Snapshot{},
			[]Event{{"a", ContainerDied, "c1"}, {"a", ContainerRemoved, "c1"}},
		},
		{"created container", Snapshot{"a": {}}, Snapshot{"a": {"c1": StateUnknown}}, []Event{{"a", ContainerChanged, "c1"}}},
		{"created then started", Snapshot{"a": {"c1": StateUnknown}}, Snapshot{"a": {"c1": StateRunning}}, []Event{{"a", ContainerStarted, "c1"}}},
		{"exited seen first", Snapshot{}, Snapshot{"a": {"c1": StateExited}}, []Event{{"a", ContainerDied, "c1"}}},
		{
			"two pods, ordered",
			Snapshot{"b": {"c2": StateRunning}},
			Snapshot{"a": {"c1": StateRunning}, "b": {"c2": StateExited}},
			[]Event{{"a", ContainerStarted, "c1"}, {"b", ContainerDied, "c2"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ComputeEvents(tc.old, tc.cur); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBuildSnapshot(t *testing.T) {
	sandboxes := []*runtimeapi.PodSandbox{
		{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{LabelPodUID: "a"}},
		{Id: "s2", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "b"}},
		{Id: "x", State: runtimeapi.PodSandboxState_SANDBOX_READY}, // not ours
		nil,
	}
	containers := []*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "s1", State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{Id: "c2", State: runtimeapi.ContainerState_CONTAINER_CREATED, Labels: map[string]string{LabelPodUID: "b"}},
		{Id: "c3", PodSandboxId: "unknown", State: runtimeapi.ContainerState_CONTAINER_EXITED},
		nil,
	}
	want := Snapshot{
		"a": {"s1": StateRunning, "c1": StateRunning},
		"b": {"s2": StateExited, "c2": StateUnknown},
	}
	if got := BuildSnapshot(sandboxes, containers); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
