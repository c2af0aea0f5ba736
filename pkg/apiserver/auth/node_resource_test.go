package auth

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// slicePods are pods using claims plus ResourceSlices by name.
type slicePods struct {
	fakePods
	slices map[string]*resourcev1.ResourceSlice
}

func (s slicePods) ResourceSlice(name string) (*resourcev1.ResourceSlice, bool) {
	sl, ok := s.slices[name]
	return sl, ok
}

func testSlice(name string, node *string) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "dra.example.com", NodeName: node, Pool: resourcev1.ResourcePool{Name: "pool", ResourceSliceCount: 1}}}
}

func testClaimPods() slicePods {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu"}, Spec: corev1.PodSpec{NodeName: "n1",
		ResourceClaims: []corev1.PodResourceClaim{{Name: "direct", ResourceClaimName: ptr.To("shared")},
			{Name: "gen", ResourceClaimTemplateName: ptr.To("tmpl")}, {Name: "pending", ResourceClaimTemplateName: ptr.To("tmpl")}}},
		Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{
			{Name: "gen", ResourceClaimName: ptr.To("gpu-gen-abcde")}}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}, Spec: corev1.PodSpec{NodeName: "n2",
		ResourceClaims: []corev1.PodResourceClaim{{Name: "c", ResourceClaimName: ptr.To("other-claim")}}}}
	return slicePods{fakePods: fakePods{"n1": {pod}, "n2": {other}}, slices: map[string]*resourcev1.ResourceSlice{
		"s1": testSlice("s1", ptr.To("n1")), "s2": testSlice("s2", ptr.To("n2")), "net": testSlice("net", nil)}}
}

// A node's resource.k8s.io rights, as upstream's Node authorizer gives them, with its reasons.
func TestNodeResourceRules(t *testing.T) {
	a := NewAuthorizer(testClaimPods())
	rs := func(verb, resource, sub, ns, name string) *request.Info {
		return res(verb, resourcev1.GroupName, resource, sub, ns, name)
	}
	for _, tc := range []struct {
		name   string
		info   *request.Info
		allow  bool
		reason string
	}{
		{"get a claim its pod names", rs("get", "resourceclaims", "", "default", "shared"), true, ""},
		{"get a generated claim of its pod", rs("get", "resourceclaims", "", "default", "gpu-gen-abcde"), true, ""},
		{"get another node's claim", rs("get", "resourceclaims", "", "default", "other-claim"), false, ""},
		{"get a claim in another namespace", rs("get", "resourceclaims", "", "kube-system", "shared"), false, ""},
		{"list claims", rs("list", "resourceclaims", "", "default", ""), false, ""},
		{"update a claim", rs("update", "resourceclaims", "", "default", "shared"), false, ""},
		{"update a claim's status", rs("update", "resourceclaims", "status", "default", "shared"), false, ""},
		{"get a template", rs("get", "resourceclaimtemplates", "", "default", "tmpl"), false, ""},
		{"get a class", rs("get", "deviceclasses", "", "", "gpu"), false, ""},
		{"create a slice", rs("create", "resourceslices", "", "", ""), true, ""},
		{"get its slice", rs("get", "resourceslices", "", "", "s1"), true, ""},
		{"update its slice", rs("update", "resourceslices", "", "", "s1"), true, ""},
		{"patch its slice", rs("patch", "resourceslices", "", "", "s1"), true, ""},
		{"delete its slice", rs("delete", "resourceslices", "", "", "s1"), true, ""},
		{"get another node's slice", rs("get", "resourceslices", "", "", "s2"), false, ""},
		{"delete another node's slice", rs("delete", "resourceslices", "", "", "s2"), false, ""},
		{"update a network slice", rs("update", "resourceslices", "", "", "net"), false, ""},
		{"get a missing slice", rs("get", "resourceslices", "", "", "s9"), false, ""},
		{"list its slices", withSelector(rs("list", "resourceslices", "", "", ""), "spec.nodeName=n1"), true, ""},
		{"watch its driver's slices", withSelector(rs("watch", "resourceslices", "", "", ""),
			"spec.driver=dra.example.com,spec.nodeName=n1"), true, ""},
		{"delete its slices", withSelector(rs("deletecollection", "resourceslices", "", "", ""), "spec.nodeName==n1"), true, ""},
		{"list slices", rs("list", "resourceslices", "", "", ""), false, sliceSelectorReason},
		{"list another node's slices", withSelector(rs("list", "resourceslices", "", "", ""), "spec.nodeName=n2"), false, sliceSelectorReason},
		{"list other nodes' slices", withSelector(rs("list", "resourceslices", "", "", ""), "spec.nodeName!=n1"), false, sliceSelectorReason},
		{"delete all slices", rs("deletecollection", "resourceslices", "", "", ""), false, sliceSelectorReason},
		{"a slice's subresource", rs("get", "resourceslices", "status", "", "s1"), false, sliceSubresourceReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := a.Decide(node1, tc.info)
			if d.Allowed != tc.allow {
				t.Fatalf("allowed %v (%s), want %v", d.Allowed, d.Reason, tc.allow)
			}
			if tc.reason != "" && !strings.HasSuffix(d.Reason, ": "+tc.reason) {
				t.Errorf("reason %q, want it to end in %q", d.Reason, tc.reason)
			}
		})
	}
	// Without a slice index no slice is a node's.
	if d := NewAuthorizer(testPods()).Decide(node1, rs("get", "resourceslices", "", "", "s1")); d.Allowed {
		t.Errorf("slice allowed without an index: %s", d.Reason)
	}
}

// NodeRestriction lets a node create and delete only the slices of its own node, and keeps it off its pods'
// status.resourceClaimStatuses.
func TestNodeRestrictionResource(t *testing.T) {
	reg := registry.New()
	slices, _ := reg.Lookup(resourcev1.GroupName, "v1", "resourceslices")
	pods, _ := reg.Lookup("", "v1", "pods")
	for _, tc := range []struct {
		name     string
		user     *request.User
		verb     string
		obj, old *resourcev1.ResourceSlice
		err      string
	}{
		{"create its own", node1, "create", testSlice("a", ptr.To("n1")), nil, ""},
		{"create another's", node1, "create", testSlice("a", ptr.To("n2")), nil,
			`resourceslices.resource.k8s.io "a" is forbidden: can only create ResourceSlice with the same NodeName as the requesting node`},
		{"create a network slice", node1, "create", testSlice("a", nil), nil, "can only create ResourceSlice"},
		{"update its own", node1, "update", testSlice("a", ptr.To("n1")), testSlice("a", ptr.To("n1")), ""},
		{"delete its own", node1, "delete", nil, testSlice("a", ptr.To("n1")), ""},
		{"delete another's", node1, "delete", nil, testSlice("a", ptr.To("n2")),
			"can only delete ResourceSlice with the same NodeName as the requesting node"},
		{"admin creates any", admin, "create", testSlice("a", ptr.To("n2")), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := &rest.Attributes{User: tc.user, Resource: slices, Info: res(tc.verb, resourcev1.GroupName, "resourceslices", "", "", "")}
			if tc.obj != nil {
				attrs.Object = tc.obj
			}
			if tc.old != nil {
				attrs.Old = tc.old
			}
			err := NodeRestriction{}.Admit(context.Background(), attrs)
			if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
	pod := testClaimPods().fakePods["n1"][0]
	changed := pod.DeepCopy()
	changed.Status.ResourceClaimStatuses = append(changed.Status.ResourceClaimStatuses,
		corev1.PodResourceClaimStatus{Name: "pending", ResourceClaimName: ptr.To("gpu-pending-xyz")})
	phase := pod.DeepCopy()
	phase.Status.Phase = corev1.PodRunning
	for _, tc := range []struct {
		name string
		cur  *corev1.Pod
		err  string
	}{
		{"status without claim changes", phase, ""},
		{"resourceClaimStatuses changed", changed, `node "n1" cannot update resource claim statues`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := &rest.Attributes{User: node1, Resource: pods, Info: res("update", "", "pods", "status", "default", "gpu"),
				Object: tc.cur, Old: pod}
			err := NodeRestriction{}.Admit(context.Background(), attrs)
			if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
}
