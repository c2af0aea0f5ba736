package nodelifecycle

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func node(ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: taints}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.NewTime(t0)}}
	}
	return n
}

func lease(renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renew}}}
}

func TestHeartbeatsTimedByTheServer(t *testing.T) {
	var h Heartbeats
	n := node(corev1.ConditionTrue)
	// First sight: heard from now, whatever the kubelet's clock says.
	if got := h.Observe(n, lease(t0.Add(-time.Hour)), t0); !got.Equal(t0) {
		t.Fatalf("first observation %v, want %v", got, t0)
	}
	// Nothing new: still the first sight.
	if got := h.Observe(n, lease(t0.Add(-time.Hour)), t0.Add(30*time.Second)); !got.Equal(t0) {
		t.Fatalf("unchanged heartbeat %v, want %v", got, t0)
	}
	if !Stale(t0, t0.Add(41*time.Second), DefaultGracePeriod) || Stale(t0, t0.Add(40*time.Second), DefaultGracePeriod) {
		t.Fatal("grace period boundary wrong")
	}
	// A renewal (even with a skewed clock) is a heartbeat.
	at := t0.Add(50 * time.Second)
	if got := h.Observe(n, lease(t0.Add(-50*time.Minute)), at); !got.Equal(at) {
		t.Fatalf("renewed lease %v, want %v", got, at)
	}
	// A status post alone is one too.
	n2 := n.DeepCopy()
	n2.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0.Add(time.Minute))
	at2 := at.Add(5 * time.Second)
	if got := h.Observe(n2, lease(t0.Add(-50*time.Minute)), at2); !got.Equal(at2) {
		t.Fatalf("status heartbeat %v, want %v", got, at2)
	}
	// Leaving master disruption: every node counts as heard from then.
	refreshed := at2.Add(10 * time.Minute)
	h.Refresh(refreshed)
	if got := h.Observe(n2, lease(t0.Add(-50*time.Minute)), refreshed.Add(time.Second)); !got.Equal(refreshed) {
		t.Fatalf("after a refresh %v, want %v", got, refreshed)
	}
	h.Forget(func(string) bool { return false })
	if got := h.Observe(n2, nil, at2.Add(time.Hour)); !got.Equal(at2.Add(time.Hour)) {
		t.Fatal("a forgotten node is not seen afresh")
	}
}

func TestMarkUnknown(t *testing.T) {
	conds := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.NewTime(t0)},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		{Type: "NetworkUnavailable", Status: corev1.ConditionFalse},
	}
	now := t0.Add(time.Minute)
	out, changed := MarkUnknown(conds, now)
	if !changed {
		t.Fatal("not changed")
	}
	for _, c := range out {
		switch c.Type {
		case "NetworkUnavailable":
			if c.Status != corev1.ConditionFalse {
				t.Errorf("a condition the kubelet does not own changed: %+v", c)
			}
		default:
			if c.Status != corev1.ConditionUnknown || c.Reason != ReasonUnknown || !c.LastTransitionTime.Time.Equal(now) {
				t.Errorf("condition %+v, want Unknown since %v", c, now)
			}
		}
		if c.Type == corev1.NodeReady && !c.LastHeartbeatTime.Time.Equal(t0) {
			t.Errorf("the heartbeat time was changed: %v", c.LastHeartbeatTime)
		}
	}
	if len(out) != 5 || conds[0].Status != corev1.ConditionTrue {
		t.Fatalf("want the two missing pressure conditions added and the input untouched: %d, %v", len(out), conds[0].Status)
	}
	if _, changed := MarkUnknown(out, now.Add(time.Minute)); changed {
		t.Fatal("marking an Unknown node again changed it")
	}
}

func TestReadinessTaints(t *testing.T) {
	now := t0.Add(time.Minute)
	other := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	unreachNE := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}}
	unreachNS := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
	notReadyNE := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}}
	const (
		unNS, unNE = corev1.TaintNodeUnreachable + ":NoSchedule", corev1.TaintNodeUnreachable + ":NoExecute"
		nrNS, nrNE = corev1.TaintNodeNotReady + ":NoSchedule", corev1.TaintNodeNotReady + ":NoExecute"
	)
	for _, tc := range []struct {
		name    string
		n       *corev1.Node
		mode    NoExecute
		want    []string
		changed bool
	}{
		{"ready keeps others", node(corev1.ConditionTrue, other), NoExecuteAdd, []string{"dedicated:NoSchedule"}, false},
		{"ready drops unreachable", node(corev1.ConditionTrue, other, unreachNS, unreachNE), NoExecuteAdd, []string{"dedicated:NoSchedule"}, true},
		{"unknown adds unreachable", node(corev1.ConditionUnknown, other), NoExecuteAdd, []string{"dedicated:NoSchedule", unNS, unNE}, true},
		{"unknown already tainted", node(corev1.ConditionUnknown, unreachNE, unreachNS), NoExecuteAdd, []string{unNE, unNS}, false},
		{"false swaps unreachable for not-ready", node(corev1.ConditionFalse, unreachNE), NoExecuteAdd, []string{nrNS, nrNE}, true},
		{"no Ready condition yet", node("", other), NoExecuteAdd, []string{"dedicated:NoSchedule"}, false},
		// A partially disrupted small zone: no NoExecute taint added, one there kept or swapped.
		{"held: unknown adds NoSchedule only", node(corev1.ConditionUnknown), NoExecuteHold, []string{unNS}, true},
		{"held: tainted stays tainted", node(corev1.ConditionUnknown, unreachNE, unreachNS), NoExecuteHold, []string{unNE, unNS}, false},
		{"held: not-ready swapped for unreachable", node(corev1.ConditionUnknown, notReadyNE), NoExecuteHold, []string{unNS, unNE}, true},
		{"held: ready drops them", node(corev1.ConditionTrue, unreachNE, unreachNS), NoExecuteHold, nil, true},
		// Every zone fully disrupted: the NoExecute taints go, the NoSchedule ones stay.
		{"removed: unknown keeps NoSchedule only", node(corev1.ConditionUnknown, unreachNE, unreachNS), NoExecuteRemove, []string{unNS}, true},
		{"removed: none added", node(corev1.ConditionFalse), NoExecuteRemove, []string{nrNS}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed := ReadinessTaints(tc.n.Spec.Taints, tc.n.Status.Conditions, now, tc.mode)
			var got []string
			for _, tt := range out {
				got = append(got, tt.Key+":"+string(tt.Effect))
				if tt.Effect == corev1.TaintEffectNoExecute && tt.TimeAdded == nil {
					t.Errorf("NoExecute taint without timeAdded")
				}
			}
			if changed != tc.changed || len(got) != len(tc.want) {
				t.Fatalf("taints %q changed %v, want %q changed %v", got, changed, tc.want, tc.changed)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("taints %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestEvictionTime(t *testing.T) {
	now := t0.Add(10 * time.Minute)
	unreach := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	noSched := corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoSchedule}
	addedAt := func(corev1.Taint) time.Time { return t0 }
	tol := func(key string, secs *int64) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs}
	}
	pod := func(tols ...corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Tolerations: tols}}
	}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		taints []corev1.Taint
		want   time.Time
	}{
		{"no taints", pod(), nil, Forever},
		{"NoSchedule only", pod(), []corev1.Taint{noSched}, Forever},
		{"untolerated", pod(), []corev1.Taint{unreach}, now},
		{"default 300 s", pod(tol(corev1.TaintNodeUnreachable, ptr.To[int64](300))), []corev1.Taint{unreach}, t0.Add(300 * time.Second)},
		{"shortest of two", pod(tol(corev1.TaintNodeUnreachable, ptr.To[int64](300)), tol("", ptr.To[int64](30))), []corev1.Taint{unreach}, t0.Add(30 * time.Second)},
		{"forever", pod(tol(corev1.TaintNodeUnreachable, nil)), []corev1.Taint{unreach}, Forever},
		{"negative is zero", pod(tol(corev1.TaintNodeUnreachable, ptr.To[int64](-5))), []corev1.Taint{unreach}, t0},
		{"one of two taints untolerated", pod(tol(corev1.TaintNodeUnreachable, nil)), []corev1.Taint{unreach, {Key: "y", Effect: corev1.TaintEffectNoExecute}}, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EvictionTime(tc.pod, tc.taints, addedAt, now); !got.Equal(tc.want) {
				t.Fatalf("EvictionTime = %v, want %v", got, tc.want)
			}
		})
	}
}
