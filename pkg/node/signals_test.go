package node

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSetPressureConditions(t *testing.T) {
	now := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	conds, events := setPressureConditions(nil, pressure{}, now)
	if len(conds) != 3 || !reflect.DeepEqual(events, []string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"}) {
		t.Fatalf("conds = %v, events = %v", conds, events)
	}
	for _, c := range conds {
		if c.Status != v1.ConditionFalse {
			t.Errorf("%s = %s", c.Type, c.Status)
		}
	}
	conds, events = setPressureConditions(conds, pressure{disk: true}, now)
	if !reflect.DeepEqual(events, []string{"NodeHasDiskPressure"}) {
		t.Errorf("events = %v", events)
	}
	if c := conds[1]; c.Type != v1.NodeDiskPressure || c.Status != v1.ConditionTrue || c.Reason != "KubeletHasDiskPressure" ||
		c.Message != "kubelet has disk pressure" {
		t.Errorf("disk = %+v", c)
	}
	if _, events = setPressureConditions(conds, pressure{disk: true}, now); len(events) != 0 {
		t.Errorf("no change: events = %v", events)
	}
}
