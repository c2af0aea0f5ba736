package node

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// readyCondition is the Ready condition for the given failures (times unset): True with reason KubeletReady
// when there are none, else False with reason KubeletNotReady and the failures as the message, worded as
// upstream's (one failure as it is, several as "[a, b]").
func readyCondition(failures []error) v1.NodeCondition {
	if err := utilerrors.NewAggregate(failures); err != nil {
		return v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady",
			Message: err.Error()}
	}
	return v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status"}
}

// errNetworkNotReady is the class of the failure saying the runtime's network is not ready (the debug page
// shows it apart from the runtime's own).
var errNetworkNotReady = errors.New("container runtime network not ready")

// runtimeFailures turns the runtime's answer to a CRI Status call into the Ready condition's failures, with
// upstream's words: the runtime down or not ready, its network not ready.
func runtimeFailures(resp *runtimeapi.StatusResponse, err error) []error {
	if err != nil {
		return []error{fmt.Errorf("container runtime is down: its CRI Status call failed: %v", err)}
	}
	var out []error
	var runtimeCond, networkCond *runtimeapi.RuntimeCondition
	for _, c := range resp.GetStatus().GetConditions() {
		switch c.GetType() {
		case runtimeapi.RuntimeReady:
			runtimeCond = c
		case runtimeapi.NetworkReady:
			networkCond = c
		}
	}
	if runtimeCond == nil || !runtimeCond.Status {
		out = append(out, fmt.Errorf("container runtime not ready: %s", conditionString(runtimeapi.RuntimeReady, runtimeCond)))
	}
	if networkCond == nil || !networkCond.Status {
		out = append(out, fmt.Errorf("%w: %s", errNetworkNotReady, conditionString(runtimeapi.NetworkReady, networkCond)))
	}
	return out
}

func conditionString(typ string, c *runtimeapi.RuntimeCondition) string {
	if c == nil {
		return typ + "=false reason: message:condition not reported"
	}
	return fmt.Sprintf("%s=%t reason:%s message:%s", typ, c.Status, c.Reason, c.Message)
}

// checkFailures runs the health checks and returns their errors, in order.
func checkFailures(checks []Check) []error {
	var out []error
	for _, c := range checks {
		if c.Func == nil {
			continue
		}
		if err := c.Func(); err != nil {
			out = append(out, err)
		}
	}
	return out
}

// setCondition puts c into conds, replacing the condition of its type or appending it. The transition time
// is kept while the status holds and set to now when it changes; changed reports a new status (or a new
// condition).
func setCondition(conds []v1.NodeCondition, c v1.NodeCondition, now metav1.Time) ([]v1.NodeCondition, bool) {
	for i := range conds {
		if conds[i].Type != c.Type {
			continue
		}
		changed := conds[i].Status != c.Status
		c.LastTransitionTime = conds[i].LastTransitionTime
		if changed || c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		conds[i] = c
		return conds, changed
	}
	c.LastTransitionTime = now
	return append(conds, c), true
}

// conditionOf returns the condition of type t, or nil.
func conditionOf(st *v1.NodeStatus, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// isReady says whether the status holds Ready=True.
func isReady(st *v1.NodeStatus) bool {
	c := conditionOf(st, v1.NodeReady)
	return c != nil && c.Status == v1.ConditionTrue
}
