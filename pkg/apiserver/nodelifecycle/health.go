package nodelifecycle

import (
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultGracePeriod is how long a node may go without a heartbeat before it is marked Unknown: the
// kubelet's Lease duration (40 s), so a node is Unknown within one Lease period of its last renewal.
// Upstream's kube-controller-manager waits 50 s since 1.32 (--node-monitor-grace-period).
const DefaultGracePeriod = 40 * time.Second

// Reason and message of the conditions of a node marked Unknown, as upstream words them.
const (
	ReasonUnknown  = "NodeStatusUnknown"
	MessageUnknown = "Kubelet stopped posting node status."
)

// Heartbeats remembers, per node, the newest heartbeat seen (the Lease's renewTime and the Ready
// condition's lastHeartbeatTime) and when this server first saw it.
type Heartbeats struct {
	seen map[string]beat
}

type beat struct {
	lease, status time.Time
	at            time.Time
}

// Observe records the node's heartbeats at now and returns when they last changed; a node seen for the
// first time counts as heard from now (a restarted server gives every node a whole grace period).
func (h *Heartbeats) Observe(n *corev1.Node, lease *coordinationv1.Lease, now time.Time) time.Time {
	if h.seen == nil {
		h.seen = map[string]beat{}
	}
	b := beat{status: readyHeartbeat(n), at: now}
	if lease != nil && lease.Spec.RenewTime != nil {
		b.lease = lease.Spec.RenewTime.Time
	}
	if old, ok := h.seen[n.Name]; ok && old.lease.Equal(b.lease) && old.status.Equal(b.status) {
		return old.at
	}
	h.seen[n.Name] = b
	return now
}

// Refresh counts every node as heard from at now: each gets a whole grace period again, as upstream gives
// them when leaving master disruption mode.
func (h *Heartbeats) Refresh(now time.Time) {
	for name, b := range h.seen {
		b.at = now
		h.seen[name] = b
	}
}

// Forget drops the nodes not in present.
func (h *Heartbeats) Forget(present func(name string) bool) {
	for name := range h.seen {
		if !present(name) {
			delete(h.seen, name)
		}
	}
}

func readyHeartbeat(n *corev1.Node) time.Time {
	if c := condition(n.Status.Conditions, corev1.NodeReady); c != nil {
		return c.LastHeartbeatTime.Time
	}
	return time.Time{}
}

func condition(conds []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// Stale says whether a node last heard from at lastHeard is overdue at now.
func Stale(lastHeard, now time.Time, grace time.Duration) bool {
	return now.Sub(lastHeard) > grace
}

// unknownConditions are the conditions a silent node's are turned to Unknown: the ones its kubelet owns.
var unknownConditions = []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}

// MarkUnknown returns the node's conditions with Ready and the pressure conditions Unknown (a missing one
// added), and whether that changed them. The heartbeat times are kept; the transition time is now.
func MarkUnknown(conds []corev1.NodeCondition, now time.Time) ([]corev1.NodeCondition, bool) {
	out := slices.Clone(conds)
	changed := false
	t := metav1.NewTime(now)
	for _, typ := range unknownConditions {
		c := condition(out, typ)
		if c == nil {
			out = append(out, corev1.NodeCondition{Type: typ, Status: corev1.ConditionUnknown, Reason: ReasonUnknown,
				Message: "Kubelet never posted node status.", LastTransitionTime: t, LastHeartbeatTime: t})
			changed = true
			continue
		}
		if c.Status == corev1.ConditionUnknown {
			continue
		}
		c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionUnknown, ReasonUnknown, MessageUnknown, t
		changed = true
	}
	return out, changed
}

// ReadinessTaints returns taints with the not-ready and unreachable taints made to match the Ready
// condition among conds (none when Ready, or when there is no Ready condition yet), and whether that
// changed them. A NoExecute taint added carries now as its timeAdded, from which tolerationSeconds count;
// noExecute says whether one may be added, or must go (see Disruption).
func ReadinessTaints(taints []corev1.Taint, conds []corev1.NodeCondition, now time.Time, noExecute NoExecute) ([]corev1.Taint, bool) {
	want := ""
	if c := condition(conds, corev1.NodeReady); c != nil {
		switch c.Status {
		case corev1.ConditionFalse:
			want = corev1.TaintNodeNotReady
		case corev1.ConditionUnknown:
			want = corev1.TaintNodeUnreachable
		}
	}
	out := make([]corev1.Taint, 0, len(taints)+2)
	have := map[corev1.TaintEffect]bool{}
	changed := false
	hadNoExecute := false
	for _, t := range taints {
		readiness := t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
		lifecycleEffect := t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		if readiness && t.Effect == corev1.TaintEffectNoExecute {
			hadNoExecute = true
		}
		if readiness && lifecycleEffect && (t.Key != want || have[t.Effect] ||
			t.Effect == corev1.TaintEffectNoExecute && noExecute == NoExecuteRemove) {
			changed = true
			continue
		}
		if readiness && lifecycleEffect {
			have[t.Effect] = true
		}
		out = append(out, t)
	}
	if want != "" {
		for _, e := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
			if have[e] {
				continue
			}
			// Held: a not-ready taint there turns unreachable (as upstream swaps them), none is added.
			if e == corev1.TaintEffectNoExecute && (noExecute == NoExecuteRemove || noExecute == NoExecuteHold && !hadNoExecute) {
				continue
			}
			t := corev1.Taint{Key: want, Effect: e}
			if e == corev1.TaintEffectNoExecute {
				t.TimeAdded = &metav1.Time{Time: now}
			}
			out = append(out, t)
			changed = true
		}
	}
	return out, changed
}
