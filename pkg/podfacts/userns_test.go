package podfacts

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestInUserNamespace(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		hostUsers *bool
		want      bool
	}{{nil, false}, {&yes, false}, {&no, true}} {
		if got := InUserNamespace(&v1.Pod{Spec: v1.PodSpec{HostUsers: tc.hostUsers}}); got != tc.want {
			t.Errorf("hostUsers %v: %v, want %v", tc.hostUsers, got, tc.want)
		}
	}
}
