package podfacts

import (
	"reflect"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNewestFirst(t *testing.T) {
	const (
		created = runtimeapi.ContainerState_CONTAINER_CREATED
		running = runtimeapi.ContainerState_CONTAINER_RUNNING
		exited  = runtimeapi.ContainerState_CONTAINER_EXITED
		unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	)
	type inst struct {
		id      string
		name    string
		created int64
		attempt uint32
		state   runtimeapi.ContainerState
	}
	for _, tc := range []struct {
		name string
		in   []inst
		want []string
	}{
		{"by creation time", []inst{{"a", "app", 1, 0, exited}, {"c", "app", 3, 2, running}, {"b", "app", 2, 1, exited}}, []string{"c", "b", "a"}},
		{"same time: by attempt", []inst{{"a", "app", 1, 0, exited}, {"b", "app", 1, 1, running}}, []string{"b", "a"}},
		{"a newer never-started instance goes behind the running one, and last",
			[]inst{{"a", "app", 1, 0, exited}, {"b", "app", 2, 1, running}, {"c", "app", 3, 2, created}},
			[]string{"b", "a", "c"}},
		{"two never-started instances", []inst{{"b", "app", 2, 1, running}, {"c", "app", 3, 2, created}, {"d", "app", 4, 3, created}},
			[]string{"b", "d", "c"}},
		{"a never-started instance newer than an exited one stays newest (the next start)",
			[]inst{{"a", "app", 1, 0, exited}, {"b", "app", 2, 1, created}}, []string{"b", "a"}},
		{"an exited instance between: the running one is older than a finished one, so stays behind",
			[]inst{{"a", "app", 1, 0, running}, {"b", "app", 2, 1, exited}, {"c", "app", 3, 2, created}}, []string{"c", "b", "a"}},
		{"an unknown instance is not a running one", []inst{{"a", "app", 1, 0, unknown}, {"b", "app", 2, 1, created}}, []string{"b", "a"}},
		{"per name", []inst{{"s1", "side", 1, 0, running}, {"s2", "side", 5, 1, created}, {"a1", "app", 2, 0, running}, {"a2", "app", 3, 1, exited}},
			[]string{"a2", "a1", "s1", "s2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var list []*runtimeapi.ContainerStatus
			for _, i := range tc.in {
				list = append(list, &runtimeapi.ContainerStatus{Id: i.id, CreatedAt: i.created, State: i.state,
					Metadata: &runtimeapi.ContainerMetadata{Name: i.name, Attempt: i.attempt}})
			}
			NewestFirst(list)
			var got []string
			for _, c := range list {
				got = append(got, c.Id)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
}
