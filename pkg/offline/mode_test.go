package offline

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestParseMode(t *testing.T) {
	for _, s := range []string{"none", "tolerating", "all"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("%s: %v %v", s, m, err)
		}
	}
	for _, s := range []string{"", "All", "some"} {
		if _, err := ParseMode(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// Which pods run from the checkpoint: under tolerating only those the control plane never evicts from an
// unreachable node; never one being deleted, finished or mirrored.
func TestRunsOffline(t *testing.T) {
	forever := v1.Toleration{Key: UnreachableTaint, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	limited := forever
	limited.TolerationSeconds = ptr.To[int64](300)
	pod := func(mod func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: v1.PodStatus{Phase: v1.PodRunning}}
		if mod != nil {
			mod(p)
		}
		return p
	}
	tolerating := func(ts ...v1.Toleration) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.Tolerations = ts } }
	for _, tc := range []struct {
		name                  string
		pod                   *v1.Pod
		none, tolerating, all bool
	}{
		{"plain", pod(nil), false, false, true},
		{"tolerating unreachable forever (a DaemonSet's)", pod(tolerating(forever)), false, true, true},
		{"tolerating for 300 s (the default toleration)", pod(tolerating(limited)), false, false, true},
		{"tolerating everything", pod(tolerating(v1.Toleration{Operator: v1.TolerationOpExists})), false, true, true},
		{"tolerating every NoExecute taint", pod(tolerating(v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})), false, true, true},
		{"tolerating unreachable NoSchedule only", pod(tolerating(v1.Toleration{Key: UnreachableTaint, Operator: v1.TolerationOpExists,
			Effect: v1.TaintEffectNoSchedule})), false, false, true},
		{"being deleted", pod(func(p *v1.Pod) { tolerating(forever)(p); p.DeletionTimestamp = &metav1.Time{} }), false, false, false},
		{"succeeded", pod(func(p *v1.Pod) { tolerating(forever)(p); p.Status.Phase = v1.PodSucceeded }), false, false, false},
		{"failed", pod(func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }), false, false, false},
		{"a mirror pod", pod(func(p *v1.Pod) {
			tolerating(forever)(p)
			p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"}
		}), false, false, false},
	} {
		for mode, want := range map[Mode]bool{None: tc.none, Tolerating: tc.tolerating, All: tc.all} {
			if got := RunsOffline(tc.pod, mode); got != want {
				t.Errorf("%s under %s: %v, want %v", tc.name, mode, got, want)
			}
		}
	}
}
