package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
)

// tokenPod creates node n1 and, on it, the pod default/<name> with a projected service account token (no
// audience, and the audience "vault"), as a node's pod asks for them.
func tokenPod(t *testing.T, ts *testServer, name string) *corev1.Pod {
	t.Helper()
	ctx := ctxT(t)
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := testPod(name)
	p.Spec.NodeName = "n1"
	p.Spec.Volumes = []corev1.Volume{{Name: "tokens", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault", Audience: "vault"}}}}}}}
	created, err := ts.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func boundTo(pod *corev1.Pod, auds ...string) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: auds,
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}}
}

// jwtClaims decodes a token's payload without verifying it.
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// The server signs service account tokens with a key of its own, as kube-apiserver's TokenRequest: with its
// claims, its defaults and bounds, and the bound pod and its node.
func TestTokenRequest(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	if fi, err := os.Stat(filepath.Join(ts.dir, "pki", auth.ServiceAccountKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key: %v %v", fi, err)
	}
	pod := tokenPod(t, ts, "web")
	sas := ts.client.CoreV1().ServiceAccounts("default")
	sa, err := sas.Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Second)
	tr, err := sas.CreateToken(ctx, "default", boundTo(pod), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Name != "default" || tr.Namespace != "default" || tr.UID != sa.UID || *tr.Spec.ExpirationSeconds != 3600 ||
		len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != DefaultServiceAccountIssuer {
		t.Errorf("request %+v", tr)
	}
	if exp := tr.Status.ExpirationTimestamp.Sub(before); exp < time.Hour || exp > time.Hour+5*time.Second {
		t.Errorf("expires in %v", exp)
	}
	c := jwtClaims(t, tr.Status.Token)
	node, _ := ts.client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	k8s, _ := json.Marshal(c["kubernetes.io"])
	wantK8s := `{"namespace":"default","node":{"name":"n1","uid":"` + string(node.UID) + `"},"pod":{"name":"web","uid":"` +
		string(pod.UID) + `"},"serviceaccount":{"name":"default","uid":"` + string(sa.UID) + `"}}`
	if c["iss"] != DefaultServiceAccountIssuer || c["sub"] != "system:serviceaccount:default:default" ||
		c["exp"].(float64)-c["iat"].(float64) != 3600 || c["nbf"] != c["iat"] || c["jti"] == "" || string(k8s) != wantK8s {
		t.Errorf("claims %v", c)
	}

	// Refusals, as kube-apiserver's.
	for _, tc := range []struct {
		name  string
		sa    string
		tr    *authenticationv1.TokenRequest
		check func(error) bool
	}{
		{"too short", "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](599)}}, apierrors.IsInvalid},
		{"missing service account", "nobody", &authenticationv1.TokenRequest{}, apierrors.IsNotFound},
		{"recreated pod", "default", func() *authenticationv1.TokenRequest {
			r := boundTo(pod)
			r.Spec.BoundObjectRef.UID = "old"
			return r
		}(), apierrors.IsConflict},
		{"pod of another service account", "builder", boundTo(pod), apierrors.IsBadRequest},
		{"unbindable kind", "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}}}, apierrors.IsBadRequest},
		{"other service account's UID", "default", &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{UID: "x"}},
			apierrors.IsConflict},
	} {
		if tc.sa == "builder" {
			if _, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := sas.CreateToken(ctx, tc.sa, tc.tr, metav1.CreateOptions{}); !tc.check(err) {
			t.Errorf("%s: got %v", tc.name, err)
		}
	}
	// A longer validity than the maximum is shortened to it.
	long, err := sas.CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](7 * 24 * 3600)}}, metav1.CreateOptions{})
	if err != nil || *long.Spec.ExpirationSeconds != 24*3600 {
		t.Errorf("long token: %v %v", long, err)
	}
}

// A token is what TokenReview and the server's own authentication accept: the service account's identity,
// with the pod and node it is bound to, for the audiences it was issued for; it stops validating once its
// pod is gone.
func TestServiceAccountTokenAuthentication(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pod := tokenPod(t, ts, "web")
	sas := ts.client.CoreV1().ServiceAccounts("default")
	tr, err := sas.CreateToken(ctx, "default", boundTo(pod), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token
	vault, err := sas.CreateToken(ctx, "default", boundTo(pod, "vault"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	review := func(token string, auds ...string) authenticationv1.TokenReviewStatus {
		t.Helper()
		r, err := ts.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: auds}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	st := review(token)
	sa, _ := sas.Get(ctx, "default", metav1.GetOptions{})
	if !st.Authenticated || st.User.Username != "system:serviceaccount:default:default" || st.User.UID != string(sa.UID) ||
		strings.Join(st.User.Groups, ",") != "system:serviceaccounts,system:serviceaccounts:default,system:authenticated" ||
		st.User.Extra["authentication.kubernetes.io/pod-name"].String() != "[web]" ||
		st.User.Extra["authentication.kubernetes.io/pod-uid"].String() != "["+string(pod.UID)+"]" ||
		st.User.Extra["authentication.kubernetes.io/node-name"].String() != "[n1]" ||
		len(st.User.Extra["authentication.kubernetes.io/node-uid"]) != 1 ||
		!strings.HasPrefix(st.User.Extra["authentication.kubernetes.io/credential-id"].String(), "[JTI=") ||
		strings.Join(st.Audiences, ",") != DefaultServiceAccountIssuer {
		t.Errorf("review %+v", st)
	}
	if st := review(vault.Status.Token, "x", "vault"); !st.Authenticated || strings.Join(st.Audiences, ",") != "vault" {
		t.Errorf("review for vault: %+v", st)
	}
	if st := review(vault.Status.Token); st.Authenticated || !strings.Contains(st.Error, "invalid for the target audiences") {
		t.Errorf("vault's token for the server: %+v", st)
	}

	// The server authenticates the token: a service account gets what any user gets, discovery and its own
	// reviews, and nothing of the API.
	as := func(token string) kubernetes.Interface {
		return kubernetes.NewForConfigOrDie(&rest.Config{Host: ts.URL(), BearerToken: token,
			TLSClientConfig: rest.TLSClientConfig{CAData: ts.CACertPEM()}})
	}
	client := as(token)
	if _, err := client.Discovery().ServerGroups(); err != nil {
		t.Errorf("discovery: %v", err)
	}
	self, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || self.Status.UserInfo.Username != "system:serviceaccount:default:default" ||
		self.Status.UserInfo.Extra["authentication.kubernetes.io/pod-name"].String() != "[web]" {
		t.Errorf("self review: %+v %v", self, err)
	}
	if _, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list pods: want 403, got %v", err)
	}
	if _, err := as(vault.Status.Token).Discovery().ServerGroups(); !apierrors.IsUnauthorized(err) {
		t.Errorf("a token for another audience: want 401, got %v", err)
	}
	if _, err := as(token + "x").Discovery().ServerGroups(); !apierrors.IsUnauthorized(err) {
		t.Errorf("a forged token: want 401, got %v", err)
	}

	// A restarted server keeps its key: the token still holds.
	dir := ts.dir
	if err := ts.Stop(); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, dir)
	if st := review(token); !st.Authenticated {
		t.Errorf("after a restart: %+v", st)
	}
	client = kubernetes.NewForConfigOrDie(&rest.Config{Host: ts.URL(), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ts.CACertPEM()}})

	// Once the pod is gone, the token is refused.
	if err := ts.client.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if st := review(token); st.Authenticated || !strings.Contains(st.Error, "invalidated") {
		t.Errorf("review after the pod is gone: %+v", st)
	}
	if _, err := client.Discovery().ServerGroups(); !apierrors.IsUnauthorized(err) {
		t.Errorf("request after the pod is gone: want 401, got %v", err)
	}
}

// A node asks for tokens of its pods' service accounts only, bound to one of its pods, for an audience the
// pod projects, as upstream's Node authorizer and NodeRestriction allow.
func TestNodeTokenRequests(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pod := tokenPod(t, ts, "web")
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.CoreV1().ServiceAccounts("default").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n1, n2 := nodeClient(t, ts, "n1"), nodeClient(t, ts, "n2")
	for _, tc := range []struct {
		name   string
		client kubernetes.Interface
		sa     string
		tr     *authenticationv1.TokenRequest
		allow  bool
	}{
		{"its pod's", n1, "default", boundTo(pod), true},
		{"its pod's, for a projected audience", n1, "default", boundTo(pod, "vault"), true},
		{"its pod's, for the server", n1, "default", boundTo(pod, DefaultServiceAccountIssuer), false},
		{"not bound", n1, "default", &authenticationv1.TokenRequest{}, false},
		{"another service account", n1, "other", boundTo(pod), false},
		{"another node's pod", n2, "default", boundTo(pod), false},
	} {
		_, err := tc.client.CoreV1().ServiceAccounts("default").CreateToken(ctx, tc.sa, tc.tr, metav1.CreateOptions{})
		if tc.allow && err != nil || !tc.allow && !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// The health endpoints and the version answer callers without credentials, as kube-apiserver's
// system:public-info-viewer role allows, without the reasons of a failure; everything else needs them.
func TestPublicHealthEndpoints(t *testing.T) {
	t.Parallel()
	commits := newBlockingCommits()
	ts := startServer(t, "", func(c *Config) { c.commitHook = commits.hook })
	ctx := ctxT(t)
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: mustTLS(t, ts)}}
	get := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, ts.URL()+path, nil)
		resp, err := anon.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz", "/version", "/version/"} {
		if code, body := get(http.MethodGet, p); code != http.StatusOK || body == "" {
			t.Errorf("GET %s: %d %q", p, code, body)
		}
	}
	for _, tc := range []struct{ method, path string }{{http.MethodGet, "/api"}, {http.MethodGet, "/readyz/storage"},
		{http.MethodGet, "/api/v1/namespaces"}, {http.MethodPost, "/healthz"}, {http.MethodGet, "/healthzx"}} {
		if code, _ := get(tc.method, tc.path); code != http.StatusUnauthorized {
			t.Errorf("%s %s: %d, want 401", tc.method, tc.path, code)
		}
	}
	enospc := error(syscall.ENOSPC)
	commits.fail.Store(&enospc)
	_, _ = ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	code, body := get(http.MethodGet, "/readyz")
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]storage failed: reason withheld") ||
		strings.Contains(body, "no space") {
		t.Errorf("anonymous readyz on a full disk: %d %q", code, body)
	}
	commits.fail.Store(nil)
}

// mustTLS returns a TLS configuration trusting the server's CA, without a client certificate.
func mustTLS(t *testing.T, ts *testServer) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ts.CACertPEM()) {
		t.Fatal("no CA certificate")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
