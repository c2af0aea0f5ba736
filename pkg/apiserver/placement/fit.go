package placement

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Reasons a node does not fit, worded as upstream's scheduler words them.
const (
	ReasonNotReady      = "node(s) were not ready"
	ReasonUnschedulable = "node(s) were unschedulable"
	ReasonSelector      = "node(s) didn't match Pod's node affinity/selector"
	ReasonTaint         = "node(s) had untolerated taint"
	ReasonCPU           = "Insufficient cpu"
	ReasonMemory        = "Insufficient memory"
	ReasonPods          = "Too many pods"
)

// Choose returns the node pod fits on, preferring the least allocated one (Score), or "" and the
// Unschedulable message when none fits. bound holds the pods already bound, by node name; terminal pods
// in it are ignored. Among equal scores the node with fewer pods wins, then the first name.
func Choose(pod *corev1.Pod, nodes []*corev1.Node, bound map[string][]*corev1.Pod) (string, string) {
	return ChooseWith(pod, nodes, bound, nil)
}

// ChooseWith is Choose with one more check: filter, when not nil, is asked
// about each node that fits otherwise, last (the allocation of a pod's
// ResourceClaims, ClaimPlan.Filter, is the costliest check), and returns ""
// or the reason the node does not fit.
func ChooseWith(pod *corev1.Pod, nodes []*corev1.Node, bound map[string][]*corev1.Pod, filter func(*corev1.Node) string) (string, string) {
	reasons := map[string]int{}
	best, bestScore, bestPods := "", int64(-1), 0
	for _, n := range nodes {
		reason := Fits(pod, n, bound[n.Name])
		if reason == "" && filter != nil {
			reason = filter(n)
		}
		if reason != "" {
			reasons[reason]++
			continue
		}
		score := Score(pod, n, bound[n.Name])
		_, _, pods := used(bound[n.Name])
		if score > bestScore || score == bestScore && (pods < bestPods || pods == bestPods && n.Name < best) {
			best, bestScore, bestPods = n.Name, score, pods
		}
	}
	if best != "" {
		return best, ""
	}
	return "", unschedulableMessage(len(nodes), reasons)
}

func unschedulableMessage(total int, reasons map[string]int) string {
	if total == 0 {
		return "0/0 nodes are available: no nodes registered."
	}
	parts := make([]string, 0, len(reasons))
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", total, strings.Join(parts, ", "))
}

// Fits returns "" when pod fits on node given the pods bound there, else the
// reason it does not.
func Fits(pod *corev1.Pod, node *corev1.Node, bound []*corev1.Pod) string {
	if !ready(node) {
		return ReasonNotReady
	}
	unschedulable := []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	if _, bad := podfacts.UntoleratedTaint(unschedulable, pod.Spec.Tolerations, nil); node.Spec.Unschedulable && bad {
		return ReasonUnschedulable
	}
	if !podfacts.MatchesNode(pod, node.Name, node.Labels) {
		return ReasonSelector
	}
	if _, bad := podfacts.UntoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations, podfacts.NoScheduleOrNoExecute); bad {
		return ReasonTaint
	}
	alloc := node.Status.Allocatable
	if alloc == nil {
		alloc = node.Status.Capacity
	}
	req := podfacts.PodRequests(pod)
	usedCPU, usedMem, count := used(bound)
	if q, ok := alloc[corev1.ResourcePods]; ok && int64(count+1) > podfacts.Value(q) {
		return ReasonPods
	}
	if q, ok := alloc[corev1.ResourceCPU]; ok && req.MilliCPU > 0 && podfacts.AddSat(usedCPU, req.MilliCPU) > podfacts.MilliValue(q) {
		return ReasonCPU
	}
	if q, ok := alloc[corev1.ResourceMemory]; ok && req.Memory > 0 && podfacts.AddSat(usedMem, req.Memory) > podfacts.Value(q) {
		return ReasonMemory
	}
	// Extended resources and huge pages: a node that does not list one has none.
	if sf, short := podfacts.ScalarShortfall(pod, alloc, active(bound), false); short {
		return "Insufficient " + string(sf.Name)
	}
	return ""
}

// active leaves out the terminal pods: they hold nothing.
func active(bound []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(bound))
	for _, p := range bound {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func used(bound []*corev1.Pod) (cpu, mem int64, count int) {
	for _, p := range active(bound) {
		r := podfacts.PodRequests(p)
		cpu, mem, count = podfacts.AddSat(cpu, r.MilliCPU), podfacts.AddSat(mem, r.Memory), count+1
	}
	return cpu, mem, count
}

// Requests counted for scoring a container that requests nothing, as upstream's scheduler counts them
// (its "non-zero" requests), so that pods without requests spread too.
const (
	nonZeroMilliCPU = 100
	nonZeroMemory   = 200 << 20
)

// Score is upstream's LeastAllocated score of node for pod, 0 to 100: the share of its allocatable cpu
// and memory left free once the pod is placed, averaged, counting every pod's requests with the non-zero
// defaults. Higher spreads pods across nodes by free allocatable.
func Score(pod *corev1.Pod, n *corev1.Node, bound []*corev1.Pod) int64 {
	alloc := n.Status.Allocatable
	if alloc == nil {
		alloc = n.Status.Capacity
	}
	cpu, mem := nonZeroRequests(pod)
	for _, p := range bound {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		c, m := nonZeroRequests(p)
		cpu, mem = podfacts.AddSat(cpu, c), podfacts.AddSat(mem, m)
	}
	q := alloc[corev1.ResourceCPU]
	mq := alloc[corev1.ResourceMemory]
	return (leastAllocated(cpu, podfacts.MilliValue(q)) + leastAllocated(mem, podfacts.Value(mq))) / 2
}

func leastAllocated(requested, capacity int64) int64 {
	if capacity <= 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * 100 / capacity
}

// nonZeroRequests sums a pod's cpu and memory requests for scoring: a pod asking for none of one counts
// the default once per container (upstream counts it per container that asks for none; the two differ
// only for pods mixing containers with and without requests).
func nonZeroRequests(pod *corev1.Pod) (cpu, mem int64) {
	r := podfacts.PodRequests(pod)
	cpu, mem = r.MilliCPU, r.Memory
	if cpu == 0 {
		cpu = nonZeroMilliCPU * int64(max(len(pod.Spec.Containers), 1))
	}
	if mem == 0 {
		mem = nonZeroMemory * int64(max(len(pod.Spec.Containers), 1))
	}
	return cpu, mem
}
