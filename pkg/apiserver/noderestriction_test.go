package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A node registers and keeps its own Node within upstream's NodeRestriction: its taints are fixed at
// registration, and it sets only the kubelet labels (and labels outside kubernetes.io and k8s.io).
func TestNodeRestrictionOnOwnNode(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	node := nodeClient(t, ts, "n1")
	bad := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}
	if _, err := node.CoreV1().Nodes().Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("register with a node-role label: %v", err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1", "example.com/x": "y"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/t", Effect: corev1.TaintEffectNoSchedule}}}}
	if _, err := node.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("register with taints and allowed labels: %v", err)
	}
	for _, tc := range []struct {
		name, patch string
		allowed     bool
	}{
		{"remove its taints", `{"spec":{"taints":null}}`, false},
		{"add a taint", `{"spec":{"taints":[{"key":"example.com/t","effect":"NoSchedule"},{"key":"x","effect":"NoExecute"}]}}`, false},
		{"add a node-role label", `{"metadata":{"labels":{"node-role.kubernetes.io/worker":""}}}`, false},
		{"add a node-restriction label", `{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"a"}}}`, false},
		{"add a subdomain's node-restriction label", `{"metadata":{"labels":{"x.node-restriction.kubernetes.io/pool":"a"}}}`, false},
		{"add a k8s.io label", `{"metadata":{"labels":{"other.k8s.io/x":"a"}}}`, false},
		{"add an owner", `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u"}]}}`, false},
		{"change the hostname label", `{"metadata":{"labels":{"kubernetes.io/hostname":"h"}}}`, true},
		{"add a node.kubernetes.io label", `{"metadata":{"labels":{"node.kubernetes.io/instance-type":"big","a.node.kubernetes.io/x":"y"}}}`, true},
		{"add a kubelet.kubernetes.io label", `{"metadata":{"labels":{"kubelet.kubernetes.io/x":"y"}}}`, true},
		{"add a label of its own domain", `{"metadata":{"labels":{"example.com/z":"y","plain":"y"}}}`, true},
		{"remove a label of its own domain", `{"metadata":{"labels":{"example.com/x":null}}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := node.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{})
			if tc.allowed && err != nil {
				t.Fatalf("want allowed, got %v", err)
			}
			if !tc.allowed && !apierrors.IsForbidden(err) {
				t.Fatalf("want Forbidden, got %v", err)
			}
		})
	}
	// An admin changes taints and any label.
	if _, err := ts.client.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType,
		[]byte(`{"spec":{"taints":null},"metadata":{"labels":{"node-role.kubernetes.io/worker":""}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("admin: %v", err)
	}
	// Status updates go on with taints and labels the node may not set.
	if _, err := node.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"status":{"phase":"Running"}}`),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("status: %v", err)
	}
}
