package auth

import (
	"context"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// attachmentPods are testPods plus VolumeAttachments by name.
type attachmentPods struct {
	fakePods
	vas map[string]*storagev1.VolumeAttachment
}

func (a attachmentPods) VolumeAttachment(name string) (*storagev1.VolumeAttachment, bool) {
	va, ok := a.vas[name]
	return va, ok
}

func testAttachments() attachmentPods {
	va := func(name, node string) *storagev1.VolumeAttachment {
		return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "csi.example.com", NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv")}}}
	}
	return attachmentPods{fakePods: testPods(), vas: map[string]*storagev1.VolumeAttachment{
		"va-1": va("va-1", "n1"), "va-2": va("va-2", "n2")}}
}

// A node's storage.k8s.io rights, as upstream's Node authorizer and system:node role give them.
func TestNodeStorageRules(t *testing.T) {
	a := NewAuthorizer(testAttachments())
	st := func(verb, resource, sub, ns, name string) *request.Info {
		return res(verb, storagev1.GroupName, resource, sub, ns, name)
	}
	for _, tc := range []struct {
		name  string
		info  *request.Info
		allow bool
	}{
		{"get a CSIDriver", st("get", "csidrivers", "", "", "csi.example.com"), true},
		{"list CSIDrivers", st("list", "csidrivers", "", "", ""), true},
		{"watch CSIDrivers", st("watch", "csidrivers", "", "", ""), true},
		{"create a CSIDriver", st("create", "csidrivers", "", "", ""), false},
		{"delete a CSIDriver", st("delete", "csidrivers", "", "", "csi.example.com"), false},
		{"create a CSINode", st("create", "csinodes", "", "", ""), true},
		{"get its CSINode", st("get", "csinodes", "", "", "n1"), true},
		{"update its CSINode", st("update", "csinodes", "", "", "n1"), true},
		{"patch its CSINode", st("patch", "csinodes", "", "", "n1"), true},
		{"delete its CSINode", st("delete", "csinodes", "", "", "n1"), true},
		{"get another CSINode", st("get", "csinodes", "", "", "n2"), false},
		{"patch another CSINode", st("patch", "csinodes", "", "", "n2"), false},
		{"list CSINodes", st("list", "csinodes", "", "", ""), false},
		{"list its CSINode by name", withSelector(st("list", "csinodes", "", "", ""), "metadata.name=n1"), false},
		{"delete every CSINode", st("deletecollection", "csinodes", "", "", ""), false},
		{"get its attachment", st("get", "volumeattachments", "", "", "va-1"), true},
		{"get another node's attachment", st("get", "volumeattachments", "", "", "va-2"), false},
		{"get a missing attachment", st("get", "volumeattachments", "", "", "va-3"), false},
		{"list attachments", st("list", "volumeattachments", "", "", ""), false},
		{"watch attachments", st("watch", "volumeattachments", "", "", ""), false},
		{"update its attachment", st("update", "volumeattachments", "", "", "va-1"), false},
		{"update its attachment's status", st("update", "volumeattachments", "status", "", "va-1"), false},
		{"get its attachment's status", st("get", "volumeattachments", "status", "", "va-1"), false},
		{"get a StorageClass", st("get", "storageclasses", "", "", "fast"), false},
		{"list capacities", st("list", "csistoragecapacities", "", "kube-system", ""), false},
		{"get a CSIDriver of another group", res("get", "", "csidrivers", "", "", "csi.example.com"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := a.Decide(node1, tc.info); d.Allowed != tc.allow {
				t.Fatalf("allowed %v (%s), want %v", d.Allowed, d.Reason, tc.allow)
			}
		})
	}
	// Without an attachment index no attachment is a node's.
	if d := NewAuthorizer(testPods()).Decide(node1, st("get", "volumeattachments", "", "", "va-1")); d.Allowed {
		t.Errorf("attachment allowed without an index: %s", d.Reason)
	}
}

// NodeRestriction lets a node write only the CSINode named after it.
func TestNodeRestrictionCSINode(t *testing.T) {
	csinodes := &registry.Resource{Group: storagev1.GroupName, Version: "v1", Name: "csinodes"}
	node := func(name string) *storagev1.CSINode {
		return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	for _, tc := range []struct {
		name     string
		user     *request.User
		verb     string
		obj, old *storagev1.CSINode
		allow    bool
	}{
		{"create its own", node1, "create", node("n1"), nil, true},
		{"create another's", node1, "create", node("n2"), nil, false},
		{"update its own", node1, "update", node("n1"), node("n1"), true},
		{"update another's", node1, "update", node("n2"), node("n2"), false},
		{"delete its own", node1, "delete", nil, node("n1"), true},
		{"delete another's", node1, "delete", nil, node("n2"), false},
		{"admin creates any", admin, "create", node("n2"), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := &rest.Attributes{User: tc.user, Resource: csinodes, Info: res(tc.verb, storagev1.GroupName, "csinodes", "", "", "")}
			// A nil *CSINode must reach Admit as a nil interface, as the handler passes it.
			if tc.obj != nil {
				attrs.Object = tc.obj
			}
			if tc.old != nil {
				attrs.Old = tc.old
			}
			err := NodeRestriction{}.Admit(context.Background(), attrs)
			if tc.allow != (err == nil) {
				t.Fatalf("allowed %v (%v), want %v", err == nil, err, tc.allow)
			}
			if err != nil && !strings.Contains(err.Error(), "can only access CSINode with the same name as the requesting node") {
				t.Errorf("reason: %v", err)
			}
		})
	}
}
