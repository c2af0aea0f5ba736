package apiserver

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/apiserver/nodelifecycle"
)

// conditionTaints are the NoSchedule taints upstream's node lifecycle controller keeps on a node while a
// pressure condition is True (TaintNodesByCondition), so that the scheduler places no more pods there.
var conditionTaints = []struct {
	condition corev1.NodeConditionType
	key       string
}{
	{corev1.NodeMemoryPressure, corev1.TaintNodeMemoryPressure},
	{corev1.NodeDiskPressure, corev1.TaintNodeDiskPressure},
	{corev1.NodePIDPressure, corev1.TaintNodePIDPressure},
}

// pressureTaints returns the node's taints with the pressure taints made to match its conditions, and
// whether that changed them. Other taints are kept as they are.
func pressureTaints(n *corev1.Node) ([]corev1.Taint, bool) {
	out := slices.Clone(n.Spec.Taints)
	changed := false
	for _, ct := range conditionTaints {
		want := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == ct.condition && c.Status == corev1.ConditionTrue
		})
		i := slices.IndexFunc(out, func(t corev1.Taint) bool { return t.Key == ct.key && t.Effect == corev1.TaintEffectNoSchedule })
		switch {
		case want && i < 0:
			out = append(out, corev1.Taint{Key: ct.key, Effect: corev1.TaintEffectNoSchedule})
			changed = true
		case !want && i >= 0:
			out = slices.Delete(out, i, i+1)
			changed = true
		}
	}
	return out, changed
}

// syncTaints keeps each node's pressure taints, and its not-ready and unreachable taints, matching its
// conditions, as upstream's node lifecycle controller does (the latter unless the node lifecycle is off).
func (c *controller) syncTaints(ctx context.Context, nodes map[string]*corev1.Node) error {
	now := c.s.cfg.Clock.Now().Truncate(time.Second)
	lifecycle := c.s.cfg.NodeMonitorGracePeriod >= 0
	var noExecute map[string]nodelifecycle.NoExecute
	if lifecycle {
		var all bool
		noExecute, all = nodelifecycle.Disruption(slices.Collect(maps.Values(nodes)))
		c.noteDisruption(ctx, all)
	}
	var errs []error
	for name, n := range nodes {
		taints, changed := pressureTaints(n)
		if lifecycle {
			var more bool
			taints, more = nodelifecycle.ReadinessTaints(taints, n.Status.Conditions, now, noExecute[name])
			changed = changed || more
		}
		if !changed {
			continue
		}
		n = n.DeepCopy()
		n.Spec.Taints = taints
		updated, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, err) // a conflict with a newer write is retried on the next pass
			continue
		}
		nodes[name] = updated
	}
	return errors.Join(errs...)
}

// noteDisruption logs entering and leaving master disruption mode (no node Ready: nothing is evicted), and
// on leaving it gives every node a whole grace period again, as upstream does.
func (c *controller) noteDisruption(ctx context.Context, all bool) {
	switch {
	case all && !c.health.allDisrupted:
		klog.FromContext(ctx).Info("No node is Ready: entering master disruption mode; no pod is evicted until one is")
	case !all && c.health.allDisrupted:
		klog.FromContext(ctx).Info("A node is Ready again: leaving master disruption mode")
		c.health.beats.Refresh(c.s.cfg.Clock.Now())
	}
	c.health.allDisrupted = all
}
