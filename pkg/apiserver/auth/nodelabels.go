package auth

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// kubeletLabels are the label keys kubelets may set on their own Node, as
// upstream's k8s.io/kubelet/pkg/apis lists them.
var kubeletLabels = map[string]bool{
	corev1.LabelHostname:                true,
	corev1.LabelTopologyZone:            true,
	corev1.LabelTopologyRegion:          true,
	corev1.LabelFailureDomainBetaZone:   true,
	corev1.LabelFailureDomainBetaRegion: true,
	corev1.LabelInstanceType:            true,
	corev1.LabelInstanceTypeStable:      true,
	corev1.LabelOSStable:                true,
	corev1.LabelArchStable:              true,
	"beta.kubernetes.io/os":             true,
	"beta.kubernetes.io/arch":           true,
}

// kubeletLabelNamespaces are the label namespaces (and, as upstream's rule
// is written, their subdomains) kubelets may set labels in.
var kubeletLabelNamespaces = []string{corev1.LabelNamespaceSuffixKubelet, corev1.LabelNamespaceSuffixNode}

// AdmitOwnNode is NodeRestriction's decision on a node's create (old nil) or
// update of its own Node object, as upstream's: no configSource set or
// changed to a new one, no change of taints or ownerReferences after
// registration, and no label added, changed or removed in the
// node-restriction.kubernetes.io namespace or in the kubernetes.io and k8s.io
// namespaces outside the kubelet labels. Labels elsewhere (example.com/x, x)
// are the node's to set. obj nil (a delete) is allowed.
func AdmitOwnNode(node string, obj, old *corev1.Node) error {
	if obj == nil {
		return nil
	}
	if old == nil {
		if obj.Spec.ConfigSource != nil { //nolint:staticcheck // checked as upstream does
			return fmt.Errorf("node %q is not allowed to create pods with a non-nil configSource", node)
		}
		if forbidden := forbiddenLabels(modifiedLabels(obj.Labels, nil)); len(forbidden) > 0 {
			return fmt.Errorf("node %q is not allowed to set the following labels: %s", node, strings.Join(forbidden, ", "))
		}
		return nil
	}
	if cs := obj.Spec.ConfigSource; cs != nil && !equality.Semantic.DeepEqual(cs, old.Spec.ConfigSource) { //nolint:staticcheck
		return fmt.Errorf("node %q is not allowed to update configSource to a new non-nil configSource", node)
	}
	if !equality.Semantic.DeepEqual(obj.Spec.Taints, old.Spec.Taints) {
		return fmt.Errorf("node %q is not allowed to modify taints", node)
	}
	if !equality.Semantic.DeepEqual(obj.OwnerReferences, old.OwnerReferences) {
		return fmt.Errorf("node %q is not allowed to modify ownerReferences", node)
	}
	if forbidden := forbiddenLabels(modifiedLabels(obj.Labels, old.Labels)); len(forbidden) > 0 {
		return fmt.Errorf("node %q is not allowed to modify labels: %s", node, strings.Join(forbidden, ", "))
	}
	return nil
}

// modifiedLabels returns the keys added, removed or changed between a and b.
func modifiedLabels(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// forbiddenLabels returns, sorted, the keys a node may not set.
func forbiddenLabels(keys []string) []string {
	var out []string
	for _, k := range keys {
		ns := labelNamespace(k)
		if inNamespace(ns, corev1.LabelNamespaceNodeRestriction) || isKubernetesNamespace(ns) && !IsKubeletLabel(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// IsKubeletLabel reports whether kubelets may set the label key on their own
// Node: one of the kubelet labels, or a key in kubelet.kubernetes.io or
// node.kubernetes.io (or a subdomain of either).
func IsKubeletLabel(key string) bool {
	if kubeletLabels[key] {
		return true
	}
	ns := labelNamespace(key)
	for _, allowed := range kubeletLabelNamespaces {
		if inNamespace(ns, allowed) {
			return true
		}
	}
	return false
}

func isKubernetesNamespace(ns string) bool {
	return inNamespace(ns, "kubernetes.io") || inNamespace(ns, "k8s.io")
}

// inNamespace reports whether label namespace ns is parent or a subdomain of it.
func inNamespace(ns, parent string) bool { return ns == parent || strings.HasSuffix(ns, "."+parent) }

// labelNamespace returns the prefix of a label key ("" when it has none).
func labelNamespace(key string) string {
	if ns, _, ok := strings.Cut(key, "/"); ok {
		return ns
	}
	return ""
}
