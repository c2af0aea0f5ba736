package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// A node's kubelet reads the CSI drivers, keeps its own CSINode and gets the attachments to it, as upstream's
// Node authorizer and NodeRestriction allow; nothing more of storage.k8s.io.
func TestStorageNodeAuthorization(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	st := ts.client.StorageV1()
	if _, err := st.CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-" + n}, Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "csi.example.com", NodeName: n, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-" + n)}}}
		if _, err := st.VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CSINodes().Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := nodeClient(t, ts, "n1").StorageV1()
	csiNode := func(name string) *storagev1.CSINode {
		return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{
			Drivers: []storagev1.CSINodeDriver{{Name: "csi.example.com", NodeID: name}}}}
	}
	for _, tc := range []struct {
		name    string
		allowed bool
		do      func() error
	}{
		{"create its own CSINode", true, func() error {
			_, err := node.CSINodes().Create(ctx, csiNode("n1"), metav1.CreateOptions{})
			return err
		}},
		{"create another node's CSINode", false, func() error {
			_, err := node.CSINodes().Create(ctx, csiNode("n3"), metav1.CreateOptions{})
			return err
		}},
		{"get its own CSINode", true, func() error { _, err := node.CSINodes().Get(ctx, "n1", metav1.GetOptions{}); return err }},
		{"patch its own CSINode", true, func() error {
			_, err := node.CSINodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
			return err
		}},
		{"get another node's CSINode", false, func() error { _, err := node.CSINodes().Get(ctx, "n2", metav1.GetOptions{}); return err }},
		{"delete another node's CSINode", false, func() error { return node.CSINodes().Delete(ctx, "n2", metav1.DeleteOptions{}) }},
		{"list CSINodes", false, func() error { _, err := node.CSINodes().List(ctx, metav1.ListOptions{}); return err }},
		{"get a CSIDriver", true, func() error { _, err := node.CSIDrivers().Get(ctx, "csi.example.com", metav1.GetOptions{}); return err }},
		{"list CSIDrivers", true, func() error { _, err := node.CSIDrivers().List(ctx, metav1.ListOptions{}); return err }},
		{"delete a CSIDriver", false, func() error { return node.CSIDrivers().Delete(ctx, "csi.example.com", metav1.DeleteOptions{}) }},
		{"get its attachment", true, func() error { _, err := node.VolumeAttachments().Get(ctx, "va-n1", metav1.GetOptions{}); return err }},
		{"get another node's attachment", false, func() error {
			_, err := node.VolumeAttachments().Get(ctx, "va-n2", metav1.GetOptions{})
			return err
		}},
		{"list attachments", false, func() error { _, err := node.VolumeAttachments().List(ctx, metav1.ListOptions{}); return err }},
		{"watch attachments", false, func() error {
			w, err := node.VolumeAttachments().Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"update its attachment's status", false, func() error {
			_, err := node.VolumeAttachments().Patch(ctx, "va-n1", types.MergePatchType, []byte(`{"status":{"attached":true}}`),
				metav1.PatchOptions{}, "status")
			return err
		}},
		{"list StorageClasses", false, func() error { _, err := node.StorageClasses().List(ctx, metav1.ListOptions{}); return err }},
		{"delete its own CSINode", true, func() error { return node.CSINodes().Delete(ctx, "n1", metav1.DeleteOptions{}) }},
	} {
		// In order: the CSINode is created first and deleted last.
		err := tc.do()
		if tc.allowed && err != nil {
			t.Errorf("%s: want allowed, got %v", tc.name, err)
		}
		if !tc.allowed && !apierrors.IsForbidden(err) {
			t.Errorf("%s: want Forbidden, got %v", tc.name, err)
		}
	}
}

// A kubelet makes its CSINode a dependent of its Node, as upstream's: the garbage collector removes it with
// the Node, or orphans it when the Node is deleted with the orphan policy (both cluster-scoped: the collector
// names them without a namespace).
func TestCSINodeCollectedWithItsNode(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	for _, name := range []string{"n1", "n2"} {
		n, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		csiNode := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: ownedBy("Node", name, n.UID, false)}}
		if _, err := nodeClient(t, ts, name).StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	orphan := metav1.DeletePropagationOrphan
	if err := ts.client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	csiNodes := ts.client.StorageV1().CSINodes()
	eventually(t, "CSINode collected", func() bool {
		_, err := csiNodes.Get(ctx, "n1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	eventually(t, "Node deleted with the orphan policy", func() bool {
		_, err := ts.client.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if c, err := csiNodes.Get(ctx, "n2", metav1.GetOptions{}); err != nil || len(c.OwnerReferences) != 0 {
		t.Errorf("orphaned CSINode: %v %+v", err, c)
	}
}
