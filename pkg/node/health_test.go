package node

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The debug page shows the network's failure apart from the runtime's, told by the failure's class.
func TestHealthRuntimeAndNetwork(t *testing.T) {
	cond := func(typ string, ok bool) *runtimeapi.RuntimeCondition {
		return &runtimeapi.RuntimeCondition{Type: typ, Status: ok, Reason: "R", Message: "m"}
	}
	status := func(c ...*runtimeapi.RuntimeCondition) *runtimeapi.StatusResponse {
		return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: c}}
	}
	for _, tt := range []struct {
		name             string
		resp             *runtimeapi.StatusResponse
		runtime, network string
	}{
		{"ready", status(cond("RuntimeReady", true), cond("NetworkReady", true)), "", ""},
		{"network not ready", status(cond("RuntimeReady", true), cond("NetworkReady", false)), "",
			"container runtime network not ready: NetworkReady=false reason:R message:m"},
		{"runtime not ready", status(cond("RuntimeReady", false), cond("NetworkReady", true)),
			"container runtime not ready: RuntimeReady=false reason:R message:m", ""},
		{"neither", status(cond("RuntimeReady", false), cond("NetworkReady", false)),
			"container runtime not ready: RuntimeReady=false reason:R message:m",
			"container runtime network not ready: NetworkReady=false reason:R message:m"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s healthState
			s.setRuntime(runtimeFailures(tt.resp, nil))
			if s.h.RuntimeMessage != tt.runtime || s.h.NetworkMessage != tt.network {
				t.Errorf("runtime %q, network %q; want %q, %q", s.h.RuntimeMessage, s.h.NetworkMessage, tt.runtime, tt.network)
			}
		})
	}
}
