package apiserver

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
)

// reviewServer starts a server with a token file holding a node's token and a user's.
func reviewServer(t *testing.T) *testServer {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	data := "node-token,system:node:n1,u1,\"system:nodes\"\nalice-token,alice,u2,dev\n"
	if err := os.WriteFile(tokens, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServer(t, "", func(c *Config) { c.TokenFile = tokens })
}

func tokenClient(ts *testServer, token string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: ts.URL(), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ts.CACertPEM()}})
}

func TestTokenReview(t *testing.T) {
	t.Parallel()
	ts := reviewServer(t)
	ctx := ctxT(t)
	rc, err := ts.NodeClientConfig("n1")
	if err != nil {
		t.Fatal(err)
	}
	node := kubernetes.NewForConfigOrDie(rc)
	review := func(c kubernetes.Interface, token string, auds ...string) (*authenticationv1.TokenReview, error) {
		return c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: auds}}, metav1.CreateOptions{})
	}
	// A static token holds for the server's audiences (its issuer's, by default) only, as kube-apiserver's.
	got, err := review(node, "alice-token")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Status.Authenticated || got.Status.User.Username != "alice" || got.Status.User.UID != "u2" ||
		len(got.Status.Audiences) != 1 || got.Status.Audiences[0] != DefaultServiceAccountIssuer {
		t.Fatalf("known token: %+v", got.Status)
	}
	if other, err := review(node, "alice-token", "https://kubelet"); err != nil || other.Status.Authenticated {
		t.Fatalf("known token for another audience: %+v, %v", other, err)
	}
	if !contains(got.Status.User.Groups, "dev") || !contains(got.Status.User.Groups, auth.GroupAuthenticated) {
		t.Errorf("groups %v", got.Status.User.Groups)
	}
	got, err = review(ts.client, "wrong")
	if err != nil || got.Status.Authenticated || got.Status.User.Username != "" {
		t.Fatalf("unknown token: %+v, %v", got, err)
	}
	if _, err := review(ts.client, ""); !apierrors.IsBadRequest(err) {
		t.Errorf("empty token: want 400, got %v", err)
	}
	// Only admins and nodes may review tokens.
	if _, err := review(tokenClient(ts, "alice-token"), "node-token"); !apierrors.IsForbidden(err) {
		t.Errorf("user reviewing a token: want 403, got %v", err)
	}
	// The node's own token authenticates it as a node, which may review tokens.
	if _, err := review(tokenClient(ts, "node-token"), "alice-token"); err != nil {
		t.Errorf("node by token: %v", err)
	}
	// Nothing is stored, and nothing but create is served.
	res := ts.client.AuthenticationV1().RESTClient().Get().Resource("tokenreviews").Do(ctx)
	var code int
	if res.StatusCode(&code); code != http.StatusMethodNotAllowed {
		t.Errorf("GET tokenreviews: %d (%v)", code, res.Error())
	}
}

func TestSubjectAccessReview(t *testing.T) {
	t.Parallel()
	ts := reviewServer(t)
	ctx := ctxT(t)
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := testPod("web")
	p.Spec.NodeName = "n1"
	if _, err := ts.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err := ts.NodeClientConfig("n1")
	if err != nil {
		t.Fatal(err)
	}
	node := kubernetes.NewForConfigOrDie(rc)
	nodeAttrs := func(verb, sub, name string) *authorizationv1.ResourceAttributes {
		return &authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: sub, Name: name, Version: "v1"}
	}
	for _, tc := range []struct {
		name   string
		asker  kubernetes.Interface
		user   string
		groups []string
		attrs  *authorizationv1.ResourceAttributes
		allow  bool
	}{
		{"admin", ts.client, "root", []string{auth.GroupMasters}, nodeAttrs("delete", "", "n2"), true},
		{"apiserver's kubelet client", node, KubeletClientUser, []string{auth.GroupMasters}, nodeAttrs("create", "proxy", "n1"), true},
		{"node on its own endpoint", node, "system:node:n1", []string{auth.GroupNodes}, nodeAttrs("get", "proxy", "n1"), true},
		{"node on another node's endpoint", node, "system:node:n1", []string{auth.GroupNodes}, nodeAttrs("get", "proxy", "n2"), false},
		{"node reads its pod", node, "system:node:n1", []string{auth.GroupNodes},
			&authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "default", Name: "web"}, true},
		{"node lists its pods", node, "system:node:n1", []string{auth.GroupNodes},
			&authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods",
				FieldSelector: &authorizationv1.FieldSelectorAttributes{RawSelector: "spec.nodeName=n1"}}, true},
		{"another node reads the pod", node, "system:node:n2", []string{auth.GroupNodes},
			&authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "default", Name: "web"}, false},
		{"user on a node's endpoint", ts.client, "alice", []string{"dev"}, nodeAttrs("get", "proxy", "n1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.asker.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: tc.user, Groups: tc.groups, ResourceAttributes: tc.attrs}},
				metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Allowed != tc.allow || got.Status.Reason == "" {
				t.Fatalf("status %+v, want allowed %v with a reason", got.Status, tc.allow)
			}
		})
	}
	// Users may not ask about others, but may ask about themselves.
	alice := tokenClient(ts, "alice-token")
	_, err = alice.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "bob", ResourceAttributes: nodeAttrs("get", "", "n1")}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("user's SubjectAccessReview: want 403, got %v", err)
	}
	self, err := alice.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}}},
		metav1.CreateOptions{})
	if err != nil || self.Status.Allowed || self.Status.Reason == "" {
		t.Errorf("self review: %+v, %v", self, err)
	}
	who, err := alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || who.Status.UserInfo.Username != "alice" {
		t.Errorf("whoami: %+v, %v", who, err)
	}
	// Invalid reviews are refused as upstream refuses them.
	for name, spec := range map[string]authorizationv1.SubjectAccessReviewSpec{
		"no subject":    {ResourceAttributes: nodeAttrs("get", "", "n1")},
		"no attributes": {User: "x"},
		"both attributes": {User: "x", ResourceAttributes: nodeAttrs("get", "", "n1"),
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"}},
	} {
		_, err := ts.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: want 422, got %v", name, err)
		}
	}
	local, err := node.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:node:n1", Groups: []string{auth.GroupNodes},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "default", Name: "web"}}},
		metav1.CreateOptions{})
	if err != nil || !local.Status.Allowed {
		t.Errorf("local review: %+v, %v", local, err)
	}
	_, err = node.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:node:n1",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "other"}}},
		metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("local review of another namespace: want 422, got %v", err)
	}
}

// The reviews are listed in discovery and OpenAPI as kube-apiserver lists them: create-only.
func TestReviewsDiscovered(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	for gv, names := range map[string][]string{
		"authentication.k8s.io/v1": {"tokenreviews", "selfsubjectreviews"},
		"authorization.k8s.io/v1":  {"subjectaccessreviews", "selfsubjectaccessreviews", "localsubjectaccessreviews"},
	} {
		list, err := ts.client.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("%s: %v", gv, err)
		}
		for _, name := range names {
			found := false
			for _, r := range list.APIResources {
				if r.Name == name {
					found = true
					if len(r.Verbs) != 1 || r.Verbs[0] != "create" {
						t.Errorf("%s: verbs %v", name, r.Verbs)
					}
				}
			}
			if !found {
				t.Errorf("%s not in %s discovery", name, gv)
			}
		}
	}
	paths, err := ts.client.Discovery().OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := paths["apis/authorization.k8s.io/v1"].Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{`"/apis/authorization.k8s.io/v1/subjectaccessreviews"`, `"createAuthorizationV1SubjectAccessReview"`,
		`"/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews"`} {
		if !strings.Contains(string(doc), p) {
			t.Errorf("OpenAPI has no %s", p)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
