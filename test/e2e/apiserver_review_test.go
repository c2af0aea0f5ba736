//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The running API server answers TokenReviews and SubjectAccessReviews as a kubelet asks them about the
// requests to its endpoint, and kubectl auth can-i through SelfSubjectAccessReviews.
func TestApiserverReviews(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1,dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodeKC := filepath.Join(dir, "node.kubeconfig")
	srv := startAPIServer(t, filepath.Join(dir, "data"), "--token-auth-file", tokens, "--node-kubeconfig", "n1="+nodeKC)
	nodeCfg, err := clientcmd.BuildConfigFromFlags("", nodeKC)
	if err != nil {
		t.Fatal(err)
	}
	node := kubernetes.NewForConfigOrDie(nodeCfg)
	alice := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.config.Host, BearerToken: "alice-token",
		TLSClientConfig: rest.TLSClientConfig{CAData: srv.config.CAData}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The node authenticates a caller's bearer token.
	tr, err := node.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: "alice-token"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Status.Authenticated || tr.Status.User.Username != "alice" {
		t.Fatalf("token review: %+v", tr.Status)
	}
	tr, err = node.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: "forged"}}, metav1.CreateOptions{})
	if err != nil || tr.Status.Authenticated {
		t.Fatalf("forged token: %+v, %v", tr, err)
	}
	if _, err := alice.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: "alice-token"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a user's token review: want 403, got %v", err)
	}

	// The node asks who may do what on its endpoint.
	for _, c := range []struct {
		user   string
		groups []string
		sub    string
		node   string
		allow  bool
	}{
		{"alice", []string{"dev"}, "proxy", "n1", false},
		{"kube-apiserver-kubelet-client", []string{"system:masters"}, "proxy", "n1", true},
		{"system:node:n1", []string{"system:nodes"}, "stats", "n1", true},
		{"system:node:n2", []string{"system:nodes"}, "proxy", "n1", false},
	} {
		sar, err := node.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: c.user, Groups: c.groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: c.sub, Name: c.node}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.user, err)
		}
		if sar.Status.Allowed != c.allow || sar.Status.Reason == "" {
			t.Errorf("%s on nodes/%s %s: %+v, want allowed %v with a reason", c.user, c.sub, c.node, sar.Status, c.allow)
		}
	}

	// kubectl auth can-i, as the admin and as the node.
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl = kubectlPath
	}
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("kubectl not found at %s: build it with hack/kube-binaries.sh", kubectl)
	}
	adminKC := filepath.Join(filepath.Dir(srv.dataDir), "admin.kubeconfig")
	for _, c := range []struct {
		kubeconfig string
		args       []string
		want       string
	}{
		{adminKC, []string{"delete", "nodes"}, "yes"},
		{nodeKC, []string{"get", "nodes/n1", "--subresource=proxy"}, "yes"},
		{nodeKC, []string{"get", "nodes/n2", "--subresource=proxy"}, "no"},
		{nodeKC, []string{"create", "tokenreviews.authentication.k8s.io"}, "yes"},
		{nodeKC, []string{"list", "pods", "-A"}, "no"},
	} {
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", c.kubeconfig, "auth", "can-i"}, c.args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		out, _ := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n") // the answer follows kubectl's warnings
		if got, _, _ := strings.Cut(lines[len(lines)-1], " "); got != c.want {
			t.Errorf("kubectl auth can-i %s: %q, want %q", strings.Join(c.args, " "), got, c.want)
		}
	}
}
