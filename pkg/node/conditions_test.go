package node

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestReadyCondition(t *testing.T) {
	tests := []struct {
		name     string
		failures []error
		status   v1.ConditionStatus
		reason   string
		message  string
	}{
		{"healthy", nil, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"},
		{"one failure", []error{errors.New("PLEG is not healthy: pleg was last seen active 3m5s ago; threshold is 3m0s")},
			v1.ConditionFalse, "KubeletNotReady", "PLEG is not healthy: pleg was last seen active 3m5s ago; threshold is 3m0s"},
		{"two failures", []error{errors.New("container runtime is down: dial: refused"), errors.New("network is bad")},
			v1.ConditionFalse, "KubeletNotReady", "[container runtime is down: dial: refused, network is bad]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := readyCondition(tt.failures)
			if c.Type != v1.NodeReady || c.Status != tt.status || c.Reason != tt.reason || c.Message != tt.message {
				t.Errorf("got %+v", c)
			}
		})
	}
}

func TestRuntimeFailures(t *testing.T) {
	cond := func(typ string, ok bool, reason, msg string) *runtimeapi.RuntimeCondition {
		return &runtimeapi.RuntimeCondition{Type: typ, Status: ok, Reason: reason, Message: msg}
	}
	status := func(c ...*runtimeapi.RuntimeCondition) *runtimeapi.StatusResponse {
		return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: c}}
	}
	tests := []struct {
		name string
		resp *runtimeapi.StatusResponse
		err  error
		want []string
	}{
		{"all ready", status(cond("RuntimeReady", true, "", ""), cond("NetworkReady", true, "", "")), nil, nil},
		{"runtime down", nil, errors.New("rpc error: code = Unavailable"),
			[]string{"container runtime is down: its CRI Status call failed: rpc error: code = Unavailable"}},
		{"network not ready", status(cond("RuntimeReady", true, "", ""),
			cond("NetworkReady", false, "NetworkPluginNotReady", "cni config uninitialized")), nil,
			[]string{"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized"}},
		{"nothing reported", status(), nil, []string{
			"container runtime not ready: RuntimeReady=false reason: message:condition not reported",
			"container runtime network not ready: NetworkReady=false reason: message:condition not reported"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runtimeFailures(tt.resp, tt.err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i].Error() != tt.want[i] {
					t.Errorf("[%d] = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestCheckFailures(t *testing.T) {
	checks := []Check{
		{Name: "ok", Func: func() error { return nil }},
		{Name: "nil"},
		{Name: "pleg", Func: func() error { return errors.New("PLEG is not healthy") }},
	}
	got := checkFailures(checks)
	if len(got) != 1 || got[0].Error() != "PLEG is not healthy" {
		t.Errorf("got %v", got)
	}
}

func TestSetCondition(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(10 * time.Second))
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, LastTransitionTime: t0}
	other := v1.NodeCondition{Type: "NetworkUnavailable", Status: v1.ConditionFalse}
	tests := []struct {
		name        string
		conds       []v1.NodeCondition
		c           v1.NodeCondition
		changed     bool
		transition  metav1.Time
		wantLen     int
		wantAtIndex int
	}{
		{"new condition appended", []v1.NodeCondition{other}, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue}, true, t1, 2, 1},
		{"same status keeps transition", []v1.NodeCondition{ready, other}, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Message: "m"}, false, t0, 2, 0},
		{"status change sets transition", []v1.NodeCondition{ready}, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse}, true, t1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := setCondition(append([]v1.NodeCondition(nil), tt.conds...), tt.c, t1)
			if changed != tt.changed || len(got) != tt.wantLen {
				t.Fatalf("changed = %v, conds = %v", changed, got)
			}
			c := got[tt.wantAtIndex]
			if c.Type != tt.c.Type || !c.LastTransitionTime.Equal(&tt.transition) || c.Message != tt.c.Message {
				t.Errorf("condition = %+v", c)
			}
		})
	}
}
