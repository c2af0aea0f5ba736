package server

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPickContainer(t *testing.T) {
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	exited := runtimeapi.ContainerState_CONTAINER_EXITED
	tests := []struct {
		name string
		ctrs []*runtimeapi.Container
		want string
	}{
		{"running wins over newer exited", []*runtimeapi.Container{{Id: "a", State: running, CreatedAt: 1}, {Id: "b", State: exited, CreatedAt: 2}}, "a"},
		{"newest exited", []*runtimeapi.Container{{Id: "a", State: exited, CreatedAt: 1}, {Id: "b", State: exited, CreatedAt: 2}}, "b"},
		{"only one", []*runtimeapi.Container{{Id: "a", State: exited}}, "a"},
	}
	pod := &v1.Pod{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pickContainer(tc.ctrs, pod, "c")
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := pickContainer(nil, pod, "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no containers: %v, want ErrNotFound", err)
	}
}
