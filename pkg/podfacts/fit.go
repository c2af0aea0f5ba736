package podfacts

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// MatchesNode reports whether a pod's nodeSelector and required node affinity accept a node with this name
// and these labels, as upstream's scheduler and kubelet decide it: every nodeSelector label must match; the
// required affinity's terms are ORed, an empty list of terms matches no node, and a term matches when all its
// expressions and fields do (a term with none matches nothing). Operators are In, NotIn, Exists,
// DoesNotExist, Gt and Lt (integers); fields are metadata.name with In and NotIn.
func MatchesNode(pod *v1.Pod, name string, labels map[string]string) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if termMatches(term, name, labels) {
			return true
		}
	}
	return false
}

func termMatches(term v1.NodeSelectorTerm, name string, labels map[string]string) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, e := range term.MatchExpressions {
		v, has := labels[e.Key]
		if !requirementMatches(e, v, has) {
			return false
		}
	}
	for _, f := range term.MatchFields {
		if f.Key != "metadata.name" || (f.Operator != v1.NodeSelectorOpIn && f.Operator != v1.NodeSelectorOpNotIn) {
			return false
		}
		if !requirementMatches(f, name, true) {
			return false
		}
	}
	return true
}

// requirementMatches decides one expression against a label's value (has: the label exists).
func requirementMatches(e v1.NodeSelectorRequirement, v string, has bool) bool {
	switch e.Operator {
	case v1.NodeSelectorOpIn:
		return has && contains(e.Values, v)
	case v1.NodeSelectorOpNotIn:
		return !has || !contains(e.Values, v)
	case v1.NodeSelectorOpExists:
		return has
	case v1.NodeSelectorOpDoesNotExist:
		return !has
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if !has || len(e.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(e.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if e.Operator == v1.NodeSelectorOpGt {
			return got > want
		}
		return got < want
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// UntoleratedTaint returns the first of taints that filter selects and none of tolerations tolerates, as
// upstream's FindMatchingUntoleratedTaint. A nil filter selects every taint.
func UntoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration, filter func(*v1.Taint) bool) (v1.Taint, bool) {
	for i := range taints {
		t := &taints[i]
		if filter != nil && !filter(t) {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(klog.Background(), t, false) {
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

// NoExecute selects NoExecute taints: the only ones the kubelet's admission checks, as upstream's.
func NoExecute(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }

// NoScheduleOrNoExecute selects the taints that keep a pod off a node in placement (PreferNoSchedule only
// scores).
func NoScheduleOrNoExecute(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}
