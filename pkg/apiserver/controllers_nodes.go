package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/apiserver/nodeipam"
	"github.com/nodeagent/kubelet/pkg/apiserver/nodelifecycle"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// nodeHealth is the node lifecycle controller's memory: the heartbeats seen, and when a NoExecute taint
// without a timeAdded was first seen.
type nodeHealth struct {
	beats      nodelifecycle.Heartbeats
	taintsSeen map[string]time.Time
	// allDisrupted: no node was Ready at the last pass (master disruption mode).
	allDisrupted bool
}

// syncNodeHealth marks the nodes whose kubelet went silent Unknown and their pods not Ready, as upstream's
// node lifecycle controller does. The taints follow in syncTaints, the evictions in evictPods.
func (c *controller) syncNodeHealth(ctx context.Context, nodes map[string]*corev1.Node) error {
	grace := c.s.cfg.NodeMonitorGracePeriod
	if grace < 0 {
		return nil
	}
	now := c.s.cfg.Clock.Now()
	c.health.beats.Forget(func(name string) bool { return nodes[name] != nil })
	var errs []error
	for name, n := range nodes {
		heard := c.health.beats.Observe(n, c.nodeLease(name), now)
		if !nodelifecycle.Stale(heard, now, grace) {
			continue
		}
		conds, changed := nodelifecycle.MarkUnknown(n.Status.Conditions, now.Truncate(time.Second))
		if !changed {
			continue
		}
		klog.FromContext(ctx).Info("Node stopped posting its status; marking it Unknown", "node", name,
			"lastHeard", heard.Format(time.RFC3339), "gracePeriod", grace)
		n = n.DeepCopy()
		n.Status.Conditions = conds
		updated, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("mark node %s Unknown: %w", name, err))
			continue
		}
		nodes[name] = updated
		// The write is ours, not a heartbeat.
		c.health.beats.Observe(updated, c.nodeLease(name), heard)
		errs = append(errs, c.markPodsNotReady(ctx, name))
	}
	return errors.Join(errs...)
}

func (c *controller) nodeLease(name string) *coordinationv1.Lease {
	o, ok := c.s.store.Get("leases/" + NodeLeaseNS + "/" + name)
	if !ok {
		return nil
	}
	obj, err := c.s.store.Decode(o)
	if err != nil {
		return nil
	}
	l, _ := obj.(*coordinationv1.Lease)
	return l
}

// podsOn returns the pods bound to node that are neither terminal nor being deleted.
func (c *controller) podsOn(node string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range decodeAll[corev1.Pod](c.s, c.s.store.Select("pods/", func(o *storage.Object) bool {
		return o.Fields["spec.nodeName"] == node
	})) {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

// markPodsNotReady sets the Ready condition of the node's pods False: their kubelet cannot say.
func (c *controller) markPodsNotReady(ctx context.Context, node string) error {
	now := metav1.NewTime(c.s.cfg.Clock.Now().Truncate(time.Second))
	var errs []error
	for _, p := range c.podsOn(node) {
		if !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status != corev1.ConditionFalse
		}) {
			continue
		}
		rest.SetPodCondition(&p.Status, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse,
			Reason: "NodeNotReady", Message: "the node's kubelet stopped posting status", LastTransitionTime: now})
		if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("mark pod %s/%s not ready: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// evictPods deletes the pods whose node has NoExecute taints they do not tolerate (any longer), as
// upstream's taint eviction controller: a DisruptionTarget condition first, then a graceful delete.
func (c *controller) evictPods(ctx context.Context, nodes map[string]*corev1.Node) error {
	if c.s.cfg.NodeMonitorGracePeriod < 0 {
		return nil
	}
	now := c.s.cfg.Clock.Now()
	seen := map[string]time.Time{}
	var errs []error
	for name, n := range nodes {
		var noExecute []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoExecute {
				noExecute = append(noExecute, t)
			}
		}
		if len(noExecute) == 0 {
			continue
		}
		addedAt := func(t corev1.Taint) time.Time {
			if t.TimeAdded != nil {
				return t.TimeAdded.Time
			}
			key := name + "\x00" + t.ToString()
			first, ok := c.health.taintsSeen[key]
			if !ok {
				first = now
			}
			seen[key] = first
			return first
		}
		for _, p := range c.podsOn(name) {
			due := nodelifecycle.EvictionTime(p, noExecute, addedAt, now)
			if due.IsZero() || due.After(now) {
				continue
			}
			errs = append(errs, c.evict(ctx, p))
		}
	}
	c.health.taintsSeen = seen
	return errors.Join(errs...)
}

func (c *controller) evict(ctx context.Context, p *corev1.Pod) error {
	klog.FromContext(ctx).Info("Evicting a pod from a tainted node", "pod", klog.KObj(p), "node", p.Spec.NodeName)
	rest.SetPodCondition(&p.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint",
		LastTransitionTime: metav1.NewTime(c.s.cfg.Clock.Now().Truncate(time.Second))})
	if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone, or changed: the next pass looks again
		}
		return fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// assignPodCIDRs gives each node without a pod CIDR the next free block of the cluster CIDR, as
// kube-controller-manager's node IPAM does.
func (c *controller) assignPodCIDRs(ctx context.Context, nodes map[string]*corev1.Node) error {
	if c.s.cfg.ClusterCIDR == "" {
		return nil
	}
	alloc, err := nodeipam.New(c.s.cfg.ClusterCIDR, c.s.cfg.NodeCIDRMaskSize)
	if err != nil {
		return err
	}
	var used []string
	for _, n := range nodes {
		used = append(used, n.Spec.PodCIDRs...)
		if n.Spec.PodCIDR != "" {
			used = append(used, n.Spec.PodCIDR)
		}
	}
	names := make([]string, 0, len(nodes))
	for name, n := range nodes {
		if n.Spec.PodCIDR == "" {
			names = append(names, name)
		}
	}
	slices.Sort(names) // registration order is unknown; name order makes the hand-out repeatable
	var errs []error
	for _, name := range names {
		cidr, err := alloc.Next(used)
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		n := nodes[name].DeepCopy()
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
		updated, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("assign pod CIDR to node %s: %w", name, err))
			continue
		}
		klog.FromContext(ctx).Info("Assigned a pod CIDR", "node", name, "podCIDR", cidr)
		nodes[name] = updated
		used = append(used, cidr)
	}
	return errors.Join(errs...)
}
