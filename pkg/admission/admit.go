package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

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
	// Host is what the node's kernel and runtime can do.
	Host Host
}

// Result is the admission decision. Reason and Message are set when Admit is false.
type Result struct {
	Admit   bool
	Reason  string
	Message string
}

// Admit decides whether pod may run on node, next to the already admitted, still active pods. It returns the
// first failure, in upstream's order: sysctls; the pod's OS; supplementalGroupsPolicy; pod count, cpu,
// memory, extended resources and huge pages, node affinity, taints; AppArmor and user namespaces.
func Admit(pod *v1.Pod, node Node, active []*v1.Pod) Result {
	for _, check := range []func() *Result{
		func() *Result { return checkSysctls(pod, node.Host.AllowedUnsafeSysctls) },
		func() *Result { return checkOS(pod, node.Host.OS) },
		func() *Result { return checkSupplementalGroupsPolicy(pod, node.Host) },
	} {
		if r := check(); r != nil {
			return *r
		}
	}
	if node.MaxPods > 0 && len(active)+1 > node.MaxPods {
		return insufficient(ReasonOutOfPods, "pods", 1, int64(len(active)), int64(node.MaxPods))
	}
	req := podfacts.PodRequests(pod)
	cpu, mem := req.MilliCPU, req.Memory
	var usedCPU, usedMem int64
	for _, p := range active {
		r := podfacts.PodRequests(p)
		usedCPU, usedMem = podfacts.AddSat(usedCPU, r.MilliCPU), podfacts.AddSat(usedMem, r.Memory)
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
	// Extended resources and huge pages; an extended resource the node does not list is left out, as
	// upstream's kubelet leaves it (a cluster-level resource: placement has counted it).
	if sf, short := podfacts.ScalarShortfall(pod, node.Allocatable, active, true); short {
		return insufficient("OutOf"+string(sf.Name), string(sf.Name), sf.Requested, sf.Used, sf.Allocatable)
	}
	if !podfacts.MatchesNode(pod, node.Name, node.Labels) {
		return Result{Reason: ReasonNodeAffinity, Message: messageNodeAffinity}
	}
	if !podfacts.IsStatic(pod) { // as upstream: static pods are exempt, and only NoExecute taints count
		if _, bad := podfacts.UntoleratedTaint(node.Taints, pod.Spec.Tolerations, podfacts.NoExecute); bad {
			return Result{Reason: ReasonTaint, Message: messageTaint}
		}
	}
	if r := checkHostFeatures(pod, node.Host); r != nil {
		return *r
	}
	return Result{Admit: true}
}

func insufficient(reason, resource string, requested, used, capacity int64) Result {
	return Result{Reason: reason, Message: fmt.Sprintf(
		"Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", resource, requested, used, capacity)}
}
