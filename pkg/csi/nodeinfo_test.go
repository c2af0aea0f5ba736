package csi

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
)

func TestAPINodeInfo(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid", Labels: map[string]string{"zone": "a"}}})
	a := &APINodeInfo{Client: kubeclienttest.Wrap(cs), Node: "n1"}

	if err := a.AddDriver(ctx, &Driver{Name: "one.csi", NodeID: "id-1", MaxVolumes: 8, Topology: map[string]string{"one/node": "n1", "zone": "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.AddDriver(ctx, &Driver{Name: "two.csi", NodeID: "id-2"}); err != nil {
		t.Fatal(err)
	}
	csiNode, err := cs.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := csiNode.OwnerReferences; len(o) != 1 || o[0].Kind != "Node" || o[0].UID != "node-uid" {
		t.Errorf("CSINode owner %+v, want the Node", o)
	}
	d := csiNode.Spec.Drivers
	if len(d) != 2 || d[0].Name != "one.csi" || d[0].NodeID != "id-1" || *d[0].Allocatable.Count != 8 ||
		strings.Join(d[0].TopologyKeys, ",") != "one/node,zone" || d[1].Name != "two.csi" || d[1].Allocatable != nil {
		t.Errorf("CSINode drivers %+v", d)
	}
	node, _ := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if got := node.Annotations[NodeIDAnnotation]; got != `{"one.csi":"id-1","two.csi":"id-2"}` {
		t.Errorf("annotation %s", got)
	}
	if node.Labels["one/node"] != "n1" {
		t.Errorf("labels %v", node.Labels)
	}

	// A driver whose topology contradicts the node's labels is refused.
	if err := a.AddDriver(ctx, &Driver{Name: "three.csi", NodeID: "x", Topology: map[string]string{"zone": "b"}}); err == nil ||
		!strings.Contains(err.Error(), "collides") {
		t.Errorf("collision: %v", err)
	}

	// Re-registration replaces the entry; removal takes it out of both objects.
	if err := a.AddDriver(ctx, &Driver{Name: "one.csi", NodeID: "id-1b"}); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveDriver(ctx, "two.csi"); err != nil {
		t.Fatal(err)
	}
	csiNode, _ = cs.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if d := csiNode.Spec.Drivers; len(d) != 1 || d[0].Name != "one.csi" || d[0].NodeID != "id-1b" {
		t.Errorf("CSINode drivers after re-registration and removal %+v", d)
	}
	node, _ = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if got := node.Annotations[NodeIDAnnotation]; got != `{"one.csi":"id-1b"}` {
		t.Errorf("annotation after removal %s", got)
	}
	if err := a.RemoveDriver(ctx, "one.csi"); err != nil {
		t.Fatal(err)
	}
	node, _ = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if _, ok := node.Annotations[NodeIDAnnotation]; ok {
		t.Errorf("annotation left with no driver: %v", node.Annotations)
	}
}
