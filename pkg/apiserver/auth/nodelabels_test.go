package auth

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cases of upstream's NodeRestriction admission_test.go for a node's own Node object.

func setAllowedUpdateLabels(node *corev1.Node, value string) *corev1.Node {
	node = node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	if value == "" {
		value = "value"
	}
	for _, k := range []string{
		// non-kube labels
		"foo", "example.com/foo",
		// kubelet labels
		"kubernetes.io/hostname", "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
		"topology.kubernetes.io/zone", "topology.kubernetes.io/region", "beta.kubernetes.io/instance-type",
		"node.kubernetes.io/instance-type", "beta.kubernetes.io/os", "beta.kubernetes.io/arch", "kubernetes.io/os",
		"kubernetes.io/arch",
		// kubelet label prefixes
		"kubelet.kubernetes.io/foo", "foo.kubelet.kubernetes.io/foo", "node.kubernetes.io/foo", "foo.node.kubernetes.io/foo",
	} {
		node.Labels[k] = value
	}
	for k := range kubeletLabels {
		node.Labels[k] = value
	}
	for _, ns := range kubeletLabelNamespaces {
		node.Labels[ns+"/foo"] = value
		node.Labels["foo."+ns+"/foo"] = value
	}
	return node
}

func setForbiddenLabels(node *corev1.Node, value string) *corev1.Node {
	node = node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	if value == "" {
		value = "value"
	}
	// node restriction labels, and arbitrary kubernetes labels
	for _, k := range []string{"node-restriction.kubernetes.io/foo", "foo.node-restriction.kubernetes.io/foo",
		"other.kubernetes.io/foo", "other.k8s.io/foo"} {
		node.Labels[k] = value
	}
	return node
}

func setAllLabels(node *corev1.Node, value string) *corev1.Node {
	return setForbiddenLabels(setAllowedUpdateLabels(node, value), value)
}

func TestAdmitOwnNode(t *testing.T) {
	mynode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mynode"}}
	withTaint := func(key string) *corev1.Node {
		n := mynode.DeepCopy()
		n.Spec.Taints = []corev1.Taint{{Key: key, Value: "bar", Effect: corev1.TaintEffectNoSchedule}}
		return n
	}
	withConfig := func(name string) *corev1.Node {
		n := mynode.DeepCopy()
		n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{ //nolint:staticcheck
			Name: name, Namespace: "ns", KubeletConfigKey: "kubelet"}}
		return n
	}
	withOwner := func(name string) *corev1.Node {
		n := mynode.DeepCopy()
		n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: "uid"}}
		return n
	}
	const forbiddenList = "foo.node-restriction.kubernetes.io/foo, node-restriction.kubernetes.io/foo, other.k8s.io/foo, other.kubernetes.io/foo"
	for _, tc := range []struct {
		name     string
		obj, old *corev1.Node
		err      string
	}{
		{"allow create of my node", mynode, nil, ""},
		{"allow create of my node with taints", withTaint("foo"), nil, ""},
		{"allow create of my node with labels", setAllowedUpdateLabels(mynode, ""), nil, ""},
		{"forbid create of my node with forbidden labels", setForbiddenLabels(mynode, ""), nil,
			"is not allowed to set the following labels: " + forbiddenList},
		{"allow update of my node", mynode, mynode, ""},
		{"allow delete of my node", nil, mynode, ""},
		{"forbid create of my node with non-nil configSource", withConfig("a"), nil, "is not allowed to create pods with a non-nil configSource"},
		{"forbid update of my node: nil configSource to new non-nil configSource", withConfig("a"), mynode,
			"update configSource to a new non-nil configSource"},
		{"forbid update of my node: non-nil configSource to new non-nil configSource", withConfig("b"), withConfig("a"),
			"update configSource to a new non-nil configSource"},
		{"allow update of my node: non-nil configSource unchanged", withConfig("a"), withConfig("a"), ""},
		{"allow update of my node: non-nil configSource to nil configSource", mynode, withConfig("a"), ""},
		{"allow update of my node: no change to taints", withTaint("foo"), withTaint("foo"), ""},
		{"allow update of my node: add allowed labels", setAllowedUpdateLabels(mynode, ""), mynode, ""},
		{"allow update of my node: remove allowed labels", mynode, setAllowedUpdateLabels(mynode, ""), ""},
		{"allow update of my node: modify allowed labels", setAllowedUpdateLabels(mynode, "b"), setAllowedUpdateLabels(mynode, "a"), ""},
		{"allow update of my node: no change to labels", setAllLabels(mynode, ""), setAllLabels(mynode, ""), ""},
		{"allow update of my node: add allowed labels while forbidden labels exist unmodified", setAllLabels(mynode, ""),
			setForbiddenLabels(mynode, ""), ""},
		{"allow update of my node: remove allowed labels while forbidden labels exist unmodified", setForbiddenLabels(mynode, ""),
			setAllLabels(mynode, ""), ""},
		{"forbid update of my node: add taints", withTaint("foo"), mynode, "is not allowed to modify taints"},
		{"forbid update of my node: remove taints", mynode, withTaint("foo"), "is not allowed to modify taints"},
		{"forbid update of my node: change taints", withTaint("foo"), withTaint("bar"), "is not allowed to modify taints"},
		{"forbid update of my node: add labels", setForbiddenLabels(mynode, ""), mynode, "is not allowed to modify labels: " + forbiddenList},
		{"forbid update of my node: remove labels", mynode, setForbiddenLabels(mynode, ""), "is not allowed to modify labels: " + forbiddenList},
		{"forbid update of my node: change labels", setForbiddenLabels(mynode, "new"), setForbiddenLabels(mynode, "old"),
			"is not allowed to modify labels: " + forbiddenList},
		{"forbid update of my node: add owner reference", withOwner("a"), mynode, `node "mynode" is not allowed to modify ownerReferences`},
		{"forbid update of my node: remove owner reference", mynode, withOwner("a"), `node "mynode" is not allowed to modify ownerReferences`},
		{"forbid update of my node: change owner reference", withOwner("a"), withOwner("b"), `node "mynode" is not allowed to modify ownerReferences`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := AdmitOwnNode("mynode", tc.obj, tc.old)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("want allowed, got %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("want an error with %q, got %v", tc.err, err)
			}
		})
	}
}

func TestIsKubeletLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"kubernetes.io/hostname": true, "kubernetes.io/arch": true, "kubernetes.io/os": true,
		"beta.kubernetes.io/arch": true, "beta.kubernetes.io/os": true, "beta.kubernetes.io/instance-type": true,
		"node.kubernetes.io/instance-type": true, "failure-domain.beta.kubernetes.io/zone": true,
		"failure-domain.beta.kubernetes.io/region": true, "topology.kubernetes.io/zone": true, "topology.kubernetes.io/region": true,
		"kubelet.kubernetes.io/x": true, "a.kubelet.kubernetes.io/x": true, "node.kubernetes.io/x": true, "a.b.node.kubernetes.io/x": true,
		"node-restriction.kubernetes.io/x": false, "kubernetes.io/role": false, "node-role.kubernetes.io/master": false,
		"xnode.kubernetes.io/x": false, "kubelet.kubernetes.io": false, "example.com/x": false,
	} {
		if got := IsKubeletLabel(key); got != want {
			t.Errorf("%s: %v, want %v", key, got, want)
		}
	}
}
