package auth

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
)

// fakePods binds pods (namespace/name, with their secret refs) to nodes.
type fakePods map[string][]*corev1.Pod

func (f fakePods) PodsOnNode(node string) []*corev1.Pod { return f[node] }

func testPods() fakePods {
	pod := func(ns, name, node, secret string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node}}
		if secret != "" {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}
		}
		return p
	}
	return fakePods{
		"n1": {pod("default", "web", "n1", "sec"), pod("kube-system", "mirror", "n1", "")},
		"n2": {pod("default", "web-2", "n2", "sec-2")},
	}
}

var (
	admin        = &request.User{Name: "kubernetes-admin", Groups: []string{GroupMasters, GroupAuthenticated}}
	kubeletProxy = &request.User{Name: "kube-apiserver-kubelet-client", Groups: []string{GroupMasters}}
	node1        = &request.User{Name: "system:node:n1", Groups: []string{GroupNodes, GroupAuthenticated}}
	notInNodes   = &request.User{Name: "system:node:n1", Groups: []string{GroupAuthenticated}}
	alice        = &request.User{Name: "alice", Groups: []string{"dev", GroupAuthenticated}}
)

func res(verb, group, resource, sub, ns, name string) *request.Info {
	return &request.Info{IsResource: true, Verb: verb, Group: group, Version: "v1", Resource: resource,
		Subresource: sub, Namespace: ns, Name: name, ObjectName: name}
}

func withSelector(info *request.Info, fieldSel string) *request.Info {
	info.FieldSelector = fieldSel
	return info
}

// The SubjectAccessReview policy: masters everything; a node its own Node (any subresource) and what the
// Node authorizer allows; everybody else only discovery and its own reviews.
func TestReviewPolicy(t *testing.T) {
	a := NewAuthorizer(testPods())
	for _, tc := range []struct {
		name  string
		user  *request.User
		info  *request.Info
		allow bool
	}{
		{"admin deletes a namespace", admin, res("delete", "", "namespaces", "", "", "x"), true},
		{"admin proxies to any node", admin, res("get", "", "nodes", "proxy", "", "n2"), true},
		{"the kubelet client proxies logs", kubeletProxy, res("get", "", "nodes", "proxy", "", "n1"), true},
		{"the kubelet client execs", kubeletProxy, res("create", "", "nodes", "proxy", "", "n2"), true},
		{"node proxies to itself", node1, res("create", "", "nodes", "proxy", "", "n1"), true},
		{"node reads its own stats", node1, res("get", "", "nodes", "stats", "", "n1"), true},
		{"node reads its own metrics", node1, res("get", "", "nodes", "metrics", "", "n1"), true},
		{"node deletes itself through its endpoint", node1, res("delete", "", "nodes", "", "", "n1"), true},
		{"node proxies to another node", node1, res("get", "", "nodes", "proxy", "", "n2"), false},
		{"node proxies to a node sharing its prefix", node1, res("get", "", "nodes", "proxy", "", "n10"), false},
		{"node proxies to no node", node1, res("get", "", "nodes", "proxy", "", ""), false},
		{"node reads another node's stats", node1, res("get", "", "nodes", "stats", "", "n2"), false},
		{"node reads another node", node1, res("get", "", "nodes", "", "", "n2"), false},
		{"node lists all nodes", node1, res("list", "", "nodes", "", "", ""), false},
		{"node creates a node", node1, res("create", "", "nodes", "", "", ""), true},
		{"node of another group proxies to itself", notInNodes, res("get", "", "nodes", "proxy", "", "n1"), false},
		{"node nodes/proxy of a node in another group", node1, res("get", "apps", "nodes", "proxy", "", "n1"), false},
		{"admin resizes a pod", admin, res("patch", "", "pods", "resize", "default", "web"), true},
		{"node resizes its own pod", node1, res("patch", "", "pods", "resize", "default", "web"), false},
		{"user resizes a pod", alice, res("patch", "", "pods", "resize", "default", "web"), false},
		{"admin adds an ephemeral container", admin, res("patch", "", "pods", "ephemeralcontainers", "default", "web"), true},
		{"node adds an ephemeral container to its own pod", node1, res("patch", "", "pods", "ephemeralcontainers", "default", "web"), false},
		{"user adds an ephemeral container", alice, res("patch", "", "pods", "ephemeralcontainers", "default", "web"), false},
		{"node reads its pod", node1, res("get", "", "pods", "", "default", "web"), true},
		{"node reads its mirror pod", node1, res("get", "", "pods", "", "kube-system", "mirror"), true},
		{"node reads another node's pod", node1, res("get", "", "pods", "", "default", "web-2"), false},
		{"node reads its pod's name in another namespace", node1, res("get", "", "pods", "", "kube-system", "web"), false},
		{"node lists its pods", node1, withSelector(res("list", "", "pods", "", "", ""), "spec.nodeName=n1"), true},
		{"node lists another node's pods", node1, withSelector(res("list", "", "pods", "", "", ""), "spec.nodeName=n2"), false},
		{"node lists every pod", node1, res("list", "", "pods", "", "", ""), false},
		{"node reads a referenced secret", node1, res("get", "", "secrets", "", "default", "sec"), true},
		{"node reads another pod's secret", node1, res("get", "", "secrets", "", "default", "sec-2"), false},
		{"node creates a TokenReview", node1, res("create", "authentication.k8s.io", "tokenreviews", "", "", ""), true},
		{"node creates a SubjectAccessReview", node1, res("create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""), true},
		{"node creates its own lease", node1, res("create", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), true},
		{"node reads another lease", node1, res("get", "coordination.k8s.io", "leases", "", "kube-node-lease", "n2"), false},
		{"user proxies to a node", alice, res("get", "", "nodes", "proxy", "", "n1"), false},
		{"user reads pods", alice, res("list", "", "pods", "", "default", ""), false},
		{"user creates a TokenReview", alice, res("create", "authentication.k8s.io", "tokenreviews", "", "", ""), false},
		{"user creates a SubjectAccessReview", alice, res("create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""), false},
		{"user reviews itself", alice, res("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", ""), true},
		{"user reads discovery", alice, &request.Info{Verb: "get", Path: "/api"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := a.Review(tc.user, tc.info)
			if d.Allowed != tc.allow {
				t.Fatalf("allowed %v (%s), want %v", d.Allowed, d.Reason, tc.allow)
			}
			if d.Reason == "" {
				t.Fatal("no reason")
			}
		})
	}
}

// A node's own endpoint is the only thing the review policy adds to what the server allows itself.
func TestDecideKeepsNodesOffTheirEndpoints(t *testing.T) {
	a := NewAuthorizer(testPods())
	for _, info := range []*request.Info{res("get", "", "nodes", "proxy", "", "n1"), res("delete", "", "nodes", "", "", "n1")} {
		if d := a.Decide(node1, info); d.Allowed {
			t.Errorf("%s %s/%s: allowed (%s)", info.Verb, info.Resource, info.Subresource, d.Reason)
		}
	}
}

func TestAccessInfo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    authorizationv1.SubjectAccessReviewSpec
		want    request.Info
		wantErr bool
	}{
		{"non-resource", authorizationv1.SubjectAccessReviewSpec{
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}},
			request.Info{Path: "/healthz", Verb: "get"}, false},
		{"named", authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "n1"}},
			request.Info{IsResource: true, Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "n1", ObjectName: "n1"}, false},
		{"raw selector", authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "list", Resource: "pods", FieldSelector: &authorizationv1.FieldSelectorAttributes{RawSelector: "spec.nodeName=n1"}}},
			request.Info{IsResource: true, Verb: "list", Resource: "pods", FieldSelector: "spec.nodeName=n1"}, false},
		{"requirements", authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "list", Resource: "pods", FieldSelector: &authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{
				{Key: "spec.nodeName", Operator: metav1.FieldSelectorOpIn, Values: []string{"n1"}},
				{Key: "metadata.name", Operator: metav1.FieldSelectorOpExists}}}}},
			request.Info{IsResource: true, Verb: "list", Resource: "pods", FieldSelector: "spec.nodeName=n1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AccessInfo(tc.spec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if *got != tc.want {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}
