package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Rejection reasons, as upstream's kubelet reports them.
const (
	ReasonOutOfPods     = "OutOfpods"
	ReasonOutOfCPU      = "OutOfcpu"
	ReasonOutOfMemory   = "OutOfmemory"
	ReasonNodeAffinity  = "NodeAffinity"
	ReasonTaint         = "TaintToleration"
	messageNodeAffinity = "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	messageTaint        = "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
)

// Node is what admission needs to know about the node.
type Node struct {
	Name        string
	Labels      map[string]string
	Taints      []v1.Taint
	Allocatable v1.ResourceList
	// MaxPods is the most pods the node runs; 0 means no limit.
	MaxPods int
}

// Result is the admission decision. Reason and Message are set when Admit is false.
type Result struct {
	Admit   bool
	Reason  string
	Message string
}

// Admit decides whether pod may run on node, next to the already admitted, still active pods. It returns the
// first failure, in upstream's order: pod count, cpu, memory, node affinity, taints.
func Admit(pod *v1.Pod, node Node, active []*v1.Pod) Result {
	if node.MaxPods > 0 && len(active)+1 > node.MaxPods {
		return insufficient(ReasonOutOfPods, "pods", 1, int64(len(active)), int64(node.MaxPods))
	}
	cpu, mem := Requests(pod)
	var usedCPU, usedMem int64
	for _, p := range active {
		c, m := Requests(p)
		usedCPU, usedMem = usedCPU+c, usedMem+m
	}
	if alloc, ok := node.Allocatable[v1.ResourceCPU]; ok && cpu > 0 {
		if capacity := podfacts.MilliValue(alloc); usedCPU+cpu > capacity {
			return insufficient(ReasonOutOfCPU, "cpu", cpu, usedCPU, capacity)
		}
	}
	if alloc, ok := node.Allocatable[v1.ResourceMemory]; ok && mem > 0 {
		if capacity := podfacts.Value(alloc); usedMem+mem > capacity {
			return insufficient(ReasonOutOfMemory, "memory", mem, usedMem, capacity)
		}
	}
	if !MatchesNode(pod, node) {
		return Result{Reason: ReasonNodeAffinity, Message: messageNodeAffinity}
	}
	if !podfacts.IsStatic(pod) {
		if _, bad := untoleratedNoExecute(pod, node.Taints); bad {
			return Result{Reason: ReasonTaint, Message: messageTaint}
		}
	}
	return Result{Admit: true}
}

func insufficient(reason, resource string, requested, used, capacity int64) Result {
	return Result{Reason: reason, Message: fmt.Sprintf(
		"Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", resource, requested, used, capacity)}
}

// Requests returns the pod's effective cpu (milli) and memory (bytes) requests, as upstream computes them:
// app containers and sidecars together, or the largest init container step if that is more, plus overhead.
func Requests(pod *v1.Pod) (cpuMilli, memBytes int64) {
	var appCPU, appMem int64
	for _, c := range pod.Spec.Containers {
		appCPU, appMem = appCPU+reqCPU(c), appMem+reqMem(c)
	}
	var sideCPU, sideMem, initCPU, initMem int64
	for i := range pod.Spec.InitContainers {
		c := pod.Spec.InitContainers[i]
		if podfacts.IsSidecar(&c) {
			sideCPU, sideMem = sideCPU+reqCPU(c), sideMem+reqMem(c)
			initCPU, initMem = max(initCPU, sideCPU), max(initMem, sideMem)
			continue
		}
		initCPU, initMem = max(initCPU, sideCPU+reqCPU(c)), max(initMem, sideMem+reqMem(c))
	}
	cpuMilli, memBytes = max(appCPU+sideCPU, initCPU), max(appMem+sideMem, initMem)
	if q, ok := pod.Spec.Overhead[v1.ResourceCPU]; ok {
		cpuMilli += podfacts.MilliValue(q)
	}
	if q, ok := pod.Spec.Overhead[v1.ResourceMemory]; ok {
		memBytes += podfacts.Value(q)
	}
	return cpuMilli, memBytes
}

func reqCPU(c v1.Container) int64 {
	if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		return max(podfacts.MilliValue(q), 0)
	}
	return 0
}

func reqMem(c v1.Container) int64 {
	if q, ok := c.Resources.Requests[v1.ResourceMemory]; ok {
		return max(podfacts.Value(q), 0)
	}
	return 0
}

// MatchesNode reports whether the pod's node selector and required node affinity accept the node.
func MatchesNode(pod *v1.Pod, node Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if termMatches(term, node) {
			return true
		}
	}
	return false
}

// termMatches: all expressions of a term must match; a term with none matches nothing.
func termMatches(term v1.NodeSelectorTerm, node Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, e := range term.MatchExpressions {
		if !requirementMatches(e, labels.Set(node.Labels)) {
			return false
		}
	}
	for _, e := range term.MatchFields {
		if e.Key != "metadata.name" || !requirementMatches(e, labels.Set{"metadata.name": node.Name}) {
			return false
		}
	}
	return true
}

func requirementMatches(e v1.NodeSelectorRequirement, set labels.Set) bool {
	var op selection.Operator
	switch e.Operator {
	case v1.NodeSelectorOpIn:
		op = selection.In
	case v1.NodeSelectorOpNotIn:
		op = selection.NotIn
	case v1.NodeSelectorOpExists:
		op = selection.Exists
	case v1.NodeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	case v1.NodeSelectorOpGt:
		op = selection.GreaterThan
	case v1.NodeSelectorOpLt:
		op = selection.LessThan
	default:
		return false
	}
	r, err := labels.NewRequirement(e.Key, op, e.Values)
	if err != nil {
		return false
	}
	return r.Matches(set)
}

// untoleratedNoExecute returns the first NoExecute taint the pod does not tolerate (the kubelet only looks at
// NoExecute taints; the scheduler handles the others).
func untoleratedNoExecute(pod *v1.Pod, taints []v1.Taint) (v1.Taint, bool) {
	for i := range taints {
		t := &taints[i]
		if t.Effect != v1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return *t, true
		}
	}
	return v1.Taint{}, false
}
