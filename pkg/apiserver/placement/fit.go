package placement

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
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

// Choose returns the node pod fits on, preferring the one with the most free
// cpu, or "" and the Unschedulable message when none fits. bound holds the
// pods already bound, by node name; terminal pods in it are ignored.
func Choose(pod *corev1.Pod, nodes []*corev1.Node, bound map[string][]*corev1.Pod) (string, string) {
	reasons := map[string]int{}
	best, bestFree := "", int64(-1)
	for _, n := range nodes {
		reason := Fits(pod, n, bound[n.Name])
		if reason != "" {
			reasons[reason]++
			continue
		}
		free := freeCPU(n, bound[n.Name])
		if free > bestFree || free == bestFree && n.Name < best {
			best, bestFree = n.Name, free
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
	if node.Spec.Unschedulable && !tolerates(pod.Spec.Tolerations, corev1.Taint{
		Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return ReasonUnschedulable
	}
	if !labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(node.Labels)) || !affinityMatches(pod, node) {
		return ReasonSelector
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerates(pod.Spec.Tolerations, t) {
			return ReasonTaint
		}
	}
	alloc := node.Status.Allocatable
	if alloc == nil {
		alloc = node.Status.Capacity
	}
	reqCPU, reqMem := Requests(pod)
	usedCPU, usedMem, count := used(bound)
	if q, ok := alloc[corev1.ResourcePods]; ok && int64(count+1) > q.Value() {
		return ReasonPods
	}
	if q, ok := alloc[corev1.ResourceCPU]; ok && reqCPU > 0 && usedCPU+reqCPU > q.MilliValue() {
		return ReasonCPU
	}
	if q, ok := alloc[corev1.ResourceMemory]; ok && reqMem > 0 && usedMem+reqMem > q.Value() {
		return ReasonMemory
	}
	return ""
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func tolerates(tols []corev1.Toleration, t corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(klog.Background(), &t, false) {
			return true
		}
	}
	return false
}

// affinityMatches checks required node affinity terms (ORed) whose
// expressions are label requirements.
func affinityMatches(pod *corev1.Pod, node *corev1.Node) bool {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		if termMatches(term, node) {
			return true
		}
	}
	return len(terms) == 0
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	for _, e := range term.MatchExpressions {
		v, has := node.Labels[e.Key]
		switch e.Operator {
		case corev1.NodeSelectorOpIn:
			if !has || !contains(e.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if has && contains(e.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpExists:
			if !has {
				return false
			}
		case corev1.NodeSelectorOpDoesNotExist:
			if has {
				return false
			}
		default:
			return false
		}
	}
	for _, f := range term.MatchFields {
		if f.Key != "metadata.name" || f.Operator != corev1.NodeSelectorOpIn || !contains(f.Values, node.Name) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Requests returns the pod's effective cpu (milli) and memory (bytes)
// requests: the larger of the sum over containers and any init container.
func Requests(pod *corev1.Pod) (cpu, mem int64) {
	for _, c := range pod.Spec.Containers {
		cpu += quantity(c.Resources.Requests, corev1.ResourceCPU, true)
		mem += quantity(c.Resources.Requests, corev1.ResourceMemory, false)
	}
	for _, c := range pod.Spec.InitContainers {
		cpu = max(cpu, quantity(c.Resources.Requests, corev1.ResourceCPU, true))
		mem = max(mem, quantity(c.Resources.Requests, corev1.ResourceMemory, false))
	}
	if o := pod.Spec.Overhead; o != nil {
		cpu += quantity(o, corev1.ResourceCPU, true)
		mem += quantity(o, corev1.ResourceMemory, false)
	}
	return cpu, mem
}

func quantity(l corev1.ResourceList, name corev1.ResourceName, milli bool) int64 {
	q, ok := l[name]
	if !ok {
		return 0
	}
	if milli {
		return q.MilliValue()
	}
	return q.Value()
}

func used(bound []*corev1.Pod) (cpu, mem int64, count int) {
	for _, p := range bound {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		c, m := Requests(p)
		cpu, mem, count = cpu+c, mem+m, count+1
	}
	return cpu, mem, count
}

func freeCPU(n *corev1.Node, bound []*corev1.Pod) int64 {
	alloc := n.Status.Allocatable
	if alloc == nil {
		alloc = n.Status.Capacity
	}
	q, ok := alloc[corev1.ResourceCPU]
	if !ok {
		q = resource.MustParse("0")
	}
	c, _, _ := used(bound)
	return q.MilliValue() - c
}
