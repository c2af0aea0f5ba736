package node

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// statusPatch returns the strategic merge patch of nodes/status that turns oldNode's status into newNode's,
// as upstream's PatchNodeStatus builds it: the spec is left out, and the addresses, whose merge key is wrong
// in the API's schema, are replaced as a whole when they changed.
func statusPatch(oldNode, newNode *v1.Node) ([]byte, error) {
	oldData, err := json.Marshal(oldNode)
	if err != nil {
		return nil, fmt.Errorf("encode node: %w", err)
	}
	replaceAddresses := len(oldNode.Status.Addresses) > 0 &&
		!apiequality.Semantic.DeepEqual(oldNode.Status.Addresses, newNode.Status.Addresses)
	diff := newNode.DeepCopy()
	diff.Spec = oldNode.Spec
	if replaceAddresses {
		diff.Status.Addresses = oldNode.Status.Addresses
	}
	newData, err := json.Marshal(diff)
	if err != nil {
		return nil, fmt.Errorf("encode node: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("create node status patch: %w", err)
	}
	if replaceAddresses {
		return withReplacedAddresses(patch, newNode.Status.Addresses)
	}
	return patch, nil
}

// withReplacedAddresses adds status.addresses to patch with a "$patch: replace" directive.
func withReplacedAddresses(patch []byte, addresses []v1.NodeAddress) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("decode node status patch: %w", err)
	}
	var list []any
	for _, a := range addresses {
		list = append(list, map[string]any{"type": string(a.Type), "address": a.Address})
	}
	list = append(list, map[string]any{"$patch": "replace"})
	status, _ := m["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		m["status"] = status
	}
	status["addresses"] = list
	return json.Marshal(m)
}

// missingDefaultLabels returns the labels upstream keeps on every node (hostname, os, arch) whose value on
// node differs from want's; empty when none.
func missingDefaultLabels(node *v1.Node, want map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{v1.LabelHostname, v1.LabelOSStable, v1.LabelArchStable, betaLabelOS, betaLabelArch} {
		if v, ok := want[k]; ok && v != "" && node.Labels[k] != v {
			out[k] = v
		}
	}
	return out
}

// metadataPatch is a merge patch setting the given labels and annotations (either may be empty).
func metadataPatch(labels, annotations map[string]string) ([]byte, error) {
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	return json.Marshal(map[string]any{"metadata": meta})
}
