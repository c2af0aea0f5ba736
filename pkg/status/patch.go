package status

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// MergeStatus returns the status to write over the API's: the kubelet's own fields and conditions, and
// what others own (conditions such as PodScheduled, the nominated node) kept from the API; DisruptionTarget,
// which the kubelet shares with others, is the kubelet's when it sets one.
func MergeStatus(api, ours v1.PodStatus) v1.PodStatus {
	out := *ours.DeepCopy()
	var conds []v1.PodCondition
	for _, c := range api.Conditions {
		if !KubeletOwned(c.Type) {
			conds = append(conds, c)
		}
	}
	for _, c := range ours.Conditions {
		switch {
		case KubeletOwned(c.Type):
			conds = append(conds, c)
		case c.Type == v1.DisruptionTarget:
			// Shared with others (as upstream's PodConditionSharedByKubelet): the kubelet's, when it
			// terminates the pod (eviction, node shutdown), replaces the API's.
			if i := slices.IndexFunc(conds, func(a v1.PodCondition) bool { return a.Type == c.Type }); i >= 0 {
				conds[i] = c
			} else {
				conds = append(conds, c)
			}
		}
	}
	out.Conditions = conds
	out.NominatedNodeName = api.NominatedNodeName
	out.ResourceClaimStatuses = api.ResourceClaimStatuses
	if out.QOSClass == "" {
		out.QOSClass = api.QOSClass
	}
	return out
}

// StatusEqual compares two statuses the way the API round-trips them (condition order ignored).
func StatusEqual(a, b v1.PodStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	sortConditions(a.Conditions)
	sortConditions(b.Conditions)
	return equality.Semantic.DeepEqual(a, b)
}

func sortConditions(c []v1.PodCondition) {
	sort.SliceStable(c, func(i, j int) bool { return c[i].Type < c[j].Type })
}

// PatchBytes returns the strategic merge patch that turns old into new on pods/status, with the pod UID as a
// precondition (as upstream's PatchPodStatus builds it).
func PatchBytes(uid types.UID, old, new v1.PodStatus) ([]byte, error) {
	oldData, err := json.Marshal(v1.Pod{Status: old})
	if err != nil {
		return nil, fmt.Errorf("marshal old status: %w", err)
	}
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: new})
	if err != nil {
		return nil, fmt.Errorf("marshal new status: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("create status patch: %w", err)
	}
	return patch, nil
}

// emptyPatch reports whether a patch from PatchBytes changes nothing in the status (it always names the UID).
func emptyPatch(patch []byte) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(patch, &m); err != nil {
		return false
	}
	_, ok := m["status"]
	return !ok
}
