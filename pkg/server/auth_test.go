package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"
)

// fakeReviews answers TokenReviews from a table of tokens and SubjectAccessReviews with the lightweight API
// server's policy: system:masters may do anything, a node only on its own Node, nobody else anything. It
// counts the reviews it answers; err, when set, fails them all.
type fakeReviews struct {
	mu          sync.Mutex
	users       map[string]authenticationv1.UserInfo
	tokenCalls  int
	accessCalls int
	last        *authorizationv1.SubjectAccessReview
	err         error
}

func newFakeReviews() *fakeReviews {
	return &fakeReviews{users: map[string]authenticationv1.UserInfo{
		"admin-token": {Username: "admin", Groups: []string{"system:masters", "system:authenticated"}},
		"jane-token":  {Username: "jane", Groups: []string{"system:authenticated"}},
	}}
}

type fakeTokenReviews struct{ f *fakeReviews }
type fakeAccessReviews struct{ f *fakeReviews }

func (f *fakeReviews) tokens() TokenReviewer  { return fakeTokenReviews{f} }
func (f *fakeReviews) access() AccessReviewer { return fakeAccessReviews{f} }

func (f *fakeReviews) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeReviews) calls() (tokens, access int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenCalls, f.accessCalls
}

func (t fakeTokenReviews) Create(_ context.Context, r *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.tokenCalls++
	if t.f.err != nil {
		return nil, t.f.err
	}
	out := r.DeepCopy()
	if u, ok := t.f.users[r.Spec.Token]; ok {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
	} else {
		out.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	return out, nil
}

func (a fakeAccessReviews) Create(_ context.Context, r *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	a.f.accessCalls++
	a.f.last = r.DeepCopy()
	if a.f.err != nil {
		return nil, a.f.err
	}
	out := r.DeepCopy()
	ra := r.Spec.ResourceAttributes
	switch {
	case slices.Contains(r.Spec.Groups, "system:masters"):
		out.Status.Allowed = true
	case slices.Contains(r.Spec.Groups, "system:nodes") && ra != nil && ra.Resource == "nodes" && r.Spec.User == "system:node:"+ra.Name:
		out.Status.Allowed = true
	default:
		out.Status.Reason = "not allowed by the test policy"
	}
	return out, nil
}

func do(t *testing.T, c *http.Client, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

// Every path but /healthz needs an authenticated caller that the API server authorizes: an ordinary user
// with a certificate of the cluster CA gets 403 on logs, exec and pprof; an admin and the node itself get
// through; tokens are reviewed by the API server.
func TestEndpointAuthorization(t *testing.T) {
	f := newFixture(t, nil)
	f.writeLog(1, "2025-01-01T00:00:01Z stdout F hello\n")
	base := "https://" + f.srv.Addr()
	otherCA := testCA(t)
	anon := f.client(nil, "")
	paths := map[string]string{
		"logs":  "/containerLogs/default/web/app",
		"exec":  "/exec/default/web/app?command=true&output=1",
		"pprof": "/debug/pprof/",
	}
	tests := []struct {
		name   string
		client *http.Client
		token  string
		code   int
		body   string
	}{
		{"anonymous", anon, "", 401, "Unauthorized"},
		{"certificate of another CA", f.client(otherCA, "admin", "system:masters"), "", 401, "Unauthorized"},
		{"ordinary user certificate", f.client(f.ca, "jane"), "", 403, "Forbidden (user=jane, verb=get, resource=nodes, subresource(s)=[proxy])"},
		{"another node", f.client(f.ca, "system:node:node-b", "system:nodes"), "", 403, "Forbidden (user=system:node:node-b"},
		{"the node itself", f.client(f.ca, "system:node:node-a", "system:nodes"), "", 0, ""},
		{"admin certificate", f.admin(), "", 0, ""},
		{"admin token", anon, "admin-token", 0, ""},
		{"ordinary user token", anon, "jane-token", 403, "Forbidden (user=jane"},
		{"unknown token", anon, "forged", 401, "Unauthorized"},
	}
	for _, tt := range tests {
		for what, path := range paths {
			t.Run(tt.name+"/"+what, func(t *testing.T) {
				code, body := do(t, tt.client, http.MethodGet, base+path, tt.token)
				if tt.code == 0 { // allowed: whatever the handler answers, never 401 or 403
					if code == 401 || code == 403 {
						t.Fatalf("got %d %q, want the handler's answer", code, body)
					}
					return
				}
				if code != tt.code || !strings.HasPrefix(body, tt.body) {
					t.Errorf("got %d %q, want %d %q", code, body, tt.code, tt.body)
				}
			})
		}
	}
	if code, body := do(t, f.admin(), http.MethodGet, base+paths["logs"], ""); code != 200 || body != "hello\n" {
		t.Errorf("admin logs: %d %q", code, body)
	}
	f.reviews.mu.Lock()
	last := f.reviews.last
	f.reviews.mu.Unlock()
	if ra := last.Spec.ResourceAttributes; ra == nil || ra.Resource != "nodes" || ra.Name != "node-a" || ra.Version != "v1" || ra.Group != "" {
		t.Errorf("review asked about %+v, want nodes/node-a in v1", ra)
	}
}

// The API server's answers are kept as upstream keeps them: allowed for 5 minutes, denied for 30 seconds,
// token reviews for 2 minutes. A review that fails is an error (500), never an allow.
func TestEndpointAuthorizationCache(t *testing.T) {
	clk := testclock.NewFakeClock(time.Now())
	f := newFixture(t, func(c *Config) { c.Clock = clk })
	url := "https://" + f.srv.Addr() + "/debug/pprof/"
	admin, jane := f.admin(), f.client(f.ca, "jane")
	for i := 0; i < 3; i++ {
		do(t, admin, http.MethodGet, url, "")
		do(t, jane, http.MethodGet, url, "")
		do(t, f.client(nil, ""), http.MethodGet, url, "admin-token")
	}
	if tok, acc := f.reviews.calls(); tok != 1 || acc != 3 { // three users: two certificates, one token
		t.Fatalf("reviews after repeats: %d token, %d access; want 1 and 3", tok, acc)
	}
	clk.Step(31 * time.Second) // the denial has expired, the allows have not
	do(t, admin, http.MethodGet, url, "")
	do(t, jane, http.MethodGet, url, "")
	if _, acc := f.reviews.calls(); acc != 4 {
		t.Fatalf("access reviews after 31 s: %d, want 4", acc)
	}
	clk.Step(5 * time.Minute)
	f.reviews.setErr(errors.New("connection refused"))
	if code, body := do(t, admin, http.MethodGet, url, ""); code != 500 || !strings.HasPrefix(body, "Authorization error (user=kube-apiserver-kubelet-client") {
		t.Errorf("review failing: %d %q", code, body)
	}
	if code, _ := do(t, f.client(nil, ""), http.MethodGet, url, "jane-token"); code != 401 {
		t.Errorf("token review failing: %d, want 401", code)
	}
}

// The caches stay bounded however many distinct callers there are.
func TestReviewCacheIsBounded(t *testing.T) {
	clk := testclock.NewFakeClock(time.Now())
	c := newTTLCache[int](clk, 10)
	for i := 0; i < 100; i++ {
		c.set(fmt.Sprint(i), i, time.Duration(i+1)*time.Second)
	}
	if c.len() != 10 {
		t.Fatalf("%d entries, want 10", c.len())
	}
	if _, ok := c.get("99"); !ok {
		t.Error("the newest entry was evicted")
	}
	clk.Step(time.Hour)
	if _, ok := c.get("99"); ok {
		t.Error("an expired entry was returned")
	}
}

// Upstream's cases (pkg/kubelet/server/auth_test.go, fine-grained authorization on): the subresources a path
// needs, tried in order, and the verb of each method.
func TestRequestAttributes(t *testing.T) {
	paths := map[string][]string{
		"/attach/ns/pod/ctr":            {"proxy"},
		"/attach/ns/pod/uid/ctr":        {"proxy"},
		"/checkpoint/ns/pod/ctr":        {"checkpoint"},
		"/configz":                      {"configz", "proxy"},
		"/flagz":                        {"configz"},
		"/statusz":                      {"statusz"},
		"/containerLogs/ns/pod/ctr":     {"proxy"},
		"/debug/flags/v":                {"proxy"},
		"/debug/pprof/heap":             {"proxy"},
		"/exec/ns/pod/ctr":              {"proxy"},
		"/exec/ns/pod/uid/ctr":          {"proxy"},
		"/healthz":                      {"healthz", "proxy"},
		"/healthz/log":                  {"healthz", "proxy"},
		"/healthz/ping":                 {"healthz", "proxy"},
		"/healthz/syncloop":             {"healthz", "proxy"},
		"/logs/":                        {"log"},
		"/logs/syslog":                  {"log"},
		"/metrics":                      {"metrics"},
		"/metrics/slis":                 {"metrics"},
		"/metrics/cadvisor":             {"metrics"},
		"/metrics/probes":               {"metrics"},
		"/metrics/resource":             {"metrics"},
		"/pods/":                        {"pods", "proxy"},
		"/portForward/ns/pod":           {"proxy"},
		"/portForward/ns/pod/uid":       {"proxy"},
		"/run/ns/pod/ctr":               {"proxy"},
		"/run/ns/pod/uid/ctr":           {"proxy"},
		"/runningpods/":                 {"pods", "proxy"},
		"/stats/":                       {"stats"},
		"/stats/summary":                {"stats"},
		"/statsx":                       {"proxy"},
		"/metricsfoo":                   {"proxy"},
		"/containerLogs/../stats/x":     {"proxy"},
		"/podsandmore":                  {"proxy"},
		"/debug/pods":                   {"proxy"},
		"/stats/../containerLogs/a/b/c": {"stats"}, // the path as sent; the mux never serves an uncleaned one
	}
	verbs := map[string]string{"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
	for path, want := range paths {
		for method, wantVerb := range verbs {
			verb, subs := requestAttributes(method, path)
			if verb != wantVerb || !slices.Equal(subs, want) {
				t.Errorf("%s %s: %s %v, want %s %v", method, path, verb, subs, wantVerb, want)
			}
		}
	}
}
