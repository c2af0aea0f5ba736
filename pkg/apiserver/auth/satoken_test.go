package auth

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// fakeObjects is an ObjectGetter over maps keyed namespace/name (nodes by name).
type fakeObjects struct {
	sas     map[string]*corev1.ServiceAccount
	pods    map[string]*corev1.Pod
	secrets map[string]*corev1.Secret
	nodes   map[string]*corev1.Node
}

func get[T any](m map[string]*T, resource, key string) (*T, error) {
	if o, ok := m[key]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource(resource), key)
}

func (f *fakeObjects) ServiceAccount(ns, name string) (*corev1.ServiceAccount, error) {
	return get(f.sas, "serviceaccounts", ns+"/"+name)
}
func (f *fakeObjects) Pod(ns, name string) (*corev1.Pod, error) {
	return get(f.pods, "pods", ns+"/"+name)
}
func (f *fakeObjects) Secret(ns, name string) (*corev1.Secret, error) {
	return get(f.secrets, "secrets", ns+"/"+name)
}
func (f *fakeObjects) Node(name string) (*corev1.Node, error) { return get(f.nodes, "nodes", name) }

var tokenEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func objMeta(ns, name, uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}
}

func testObjects() *fakeObjects {
	return &fakeObjects{
		sas: map[string]*corev1.ServiceAccount{"ns/sa": {ObjectMeta: objMeta("ns", "sa", "sa-uid")}},
		pods: map[string]*corev1.Pod{"ns/p": {ObjectMeta: objMeta("ns", "p", "pod-uid"),
			Spec: corev1.PodSpec{ServiceAccountName: "sa", NodeName: "n1"}}},
		secrets: map[string]*corev1.Secret{"ns/s": {ObjectMeta: objMeta("ns", "s", "secret-uid")}},
		nodes:   map[string]*corev1.Node{"n1": {ObjectMeta: objMeta("", "n1", "node-uid")}},
	}
}

// The claims are kube-apiserver's: the registered ones, and kubernetes.io with the service account and the
// object the token is bound to (a pod's node with it).
func TestTokenClaims(t *testing.T) {
	objs := testObjects()
	sa, pod, secret, node := objs.sas["ns/sa"], objs.pods["ns/p"], objs.secrets["ns/s"], objs.nodes["n1"]
	for _, tc := range []struct {
		name string
		subj rest.TokenSubject
		want string // the kubernetes.io claim
	}{
		{"unbound", rest.TokenSubject{ServiceAccount: sa},
			`{"namespace":"ns","serviceaccount":{"name":"sa","uid":"sa-uid"}}`},
		{"pod with its node", rest.TokenSubject{ServiceAccount: sa, Pod: pod, Node: node},
			`{"namespace":"ns","serviceaccount":{"name":"sa","uid":"sa-uid"},"pod":{"name":"p","uid":"pod-uid"},"node":{"name":"n1","uid":"node-uid"}}`},
		{"secret", rest.TokenSubject{ServiceAccount: sa, Secret: secret},
			`{"namespace":"ns","serviceaccount":{"name":"sa","uid":"sa-uid"},"secret":{"name":"s","uid":"secret-uid"}}`},
		{"node", rest.TokenSubject{ServiceAccount: sa, Node: node},
			`{"namespace":"ns","serviceaccount":{"name":"sa","uid":"sa-uid"},"node":{"name":"n1","uid":"node-uid"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newTokenClaims("https://issuer", tc.subj, []string{"a", "b"}, tokenEpoch, time.Hour, "id-1")
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(c)
			var got map[string]json.RawMessage
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"iss": `"https://issuer"`, "sub": `"system:serviceaccount:ns:sa"`, "aud": `["a","b"]`,
				"iat": "1767323045", "nbf": "1767323045", "exp": "1767326645", "jti": `"id-1"`, "kubernetes.io": tc.want}
			if len(got) != len(want) {
				t.Errorf("claims %s", raw)
			}
			for k, v := range want {
				if string(got[k]) != v {
					t.Errorf("%s: got %s, want %s", k, got[k], v)
				}
			}
		})
	}
	if _, err := newTokenClaims("i", rest.TokenSubject{ServiceAccount: sa, Pod: pod, Secret: secret}, nil, tokenEpoch, time.Hour, ""); err == nil {
		t.Error("a token bound to a pod and a secret")
	}
}

// A token validates while its times hold (with a minute of leeway) and the objects it names exist with their
// UIDs; a bound object deleted more than a minute ago invalidates it, as kube-apiserver's validator.
func TestValidateTokenClaims(t *testing.T) {
	claims := func(mod func(c *tokenClaims)) *tokenClaims {
		objs := testObjects()
		c, err := newTokenClaims("i", rest.TokenSubject{ServiceAccount: objs.sas["ns/sa"], Pod: objs.pods["ns/p"], Node: objs.nodes["n1"]},
			[]string{"a"}, tokenEpoch, time.Hour, "jti-1")
		if err != nil {
			t.Fatal(err)
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	deleted := func(ago time.Duration) *metav1.Time { d := metav1.NewTime(tokenEpoch.Add(-ago)); return &d }
	for _, tc := range []struct {
		name    string
		claims  *tokenClaims
		objs    func(o *fakeObjects)
		at      time.Duration // after the epoch
		wantErr string
	}{
		{name: "valid", claims: claims(nil)},
		{name: "valid within the leeway after expiry", claims: claims(nil), at: time.Hour + 59*time.Second},
		{name: "expired", claims: claims(nil), at: time.Hour + 61*time.Second, wantErr: "has expired"},
		{name: "not yet valid", claims: claims(nil), at: -2 * time.Minute, wantErr: "not valid yet"},
		{name: "issued in the future", claims: claims(func(c *tokenClaims) { c.NotBefore = nil }), at: -2 * time.Minute,
			wantErr: "issued in the future"},
		{name: "service account gone", claims: claims(nil), objs: func(o *fakeObjects) { delete(o.sas, "ns/sa") }, wantErr: "not found"},
		{name: "service account recreated", claims: claims(nil), objs: func(o *fakeObjects) { o.sas["ns/sa"].UID = "other" },
			wantErr: "does not match claim"},
		{name: "service account deleted long ago", claims: claims(nil),
			objs: func(o *fakeObjects) { o.sas["ns/sa"].DeletionTimestamp = deleted(2 * time.Minute) }, wantErr: "has been deleted"},
		{name: "pod gone", claims: claims(nil), objs: func(o *fakeObjects) { delete(o.pods, "ns/p") }, wantErr: "invalidated"},
		{name: "pod recreated", claims: claims(nil), objs: func(o *fakeObjects) { o.pods["ns/p"].UID = "other" },
			wantErr: "does not match service account pod ref"},
		{name: "pod terminating", claims: claims(nil),
			objs: func(o *fakeObjects) { o.pods["ns/p"].DeletionTimestamp = deleted(30 * time.Second) }},
		{name: "pod deleted long ago", claims: claims(nil),
			objs: func(o *fakeObjects) { o.pods["ns/p"].DeletionTimestamp = deleted(2 * time.Minute) }, wantErr: "invalidated"},
		{name: "pod-bound token survives its node", claims: claims(nil), objs: func(o *fakeObjects) { delete(o.nodes, "n1") }},
		{name: "secret gone", claims: claims(func(c *tokenClaims) {
			c.Kubernetes.Pod, c.Kubernetes.Node = nil, nil
			c.Kubernetes.Secret = &objectRef{Name: "s", UID: "secret-uid"}
		}), objs: func(o *fakeObjects) { delete(o.secrets, "ns/s") }, wantErr: "invalidated"},
		{name: "node-bound token without its node", claims: claims(func(c *tokenClaims) { c.Kubernetes.Pod = nil }),
			objs: func(o *fakeObjects) { delete(o.nodes, "n1") }, wantErr: "invalidated"},
		{name: "node-bound token", claims: claims(func(c *tokenClaims) { c.Kubernetes.Pod = nil })},
		{name: "no kubernetes claims", claims: claims(func(c *tokenClaims) { c.Kubernetes = nil }), wantErr: "no service account"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := testObjects()
			if tc.objs != nil {
				tc.objs(objs)
			}
			info, err := validateTokenClaims(tc.claims, tokenEpoch.Add(tc.at), objs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if info.Namespace != "ns" || info.Name != "sa" || info.UID != "sa-uid" || info.CredentialID != "JTI=jti-1" {
				t.Errorf("info %+v", info)
			}
		})
	}
}

// The user of a token is kube-apiserver's: the service account's name, UID and groups, and the pod, node and
// credential as extra fields.
func TestServiceAccountUser(t *testing.T) {
	u := (&serviceAccountInfo{Namespace: "ns", Name: "sa", UID: "u", PodName: "p", PodUID: "pu", NodeName: "n", NodeUID: "nu",
		CredentialID: "JTI=x"}).user()
	if u.Name != "system:serviceaccount:ns:sa" || u.UID != "u" ||
		!reflect.DeepEqual(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:ns", GroupAuthenticated}) {
		t.Errorf("user %+v", u)
	}
	want := map[string][]string{
		"authentication.kubernetes.io/pod-name": {"p"}, "authentication.kubernetes.io/pod-uid": {"pu"},
		"authentication.kubernetes.io/node-name": {"n"}, "authentication.kubernetes.io/node-uid": {"nu"},
		"authentication.kubernetes.io/credential-id": {"JTI=x"},
	}
	if !reflect.DeepEqual(u.Extra, want) {
		t.Errorf("extra %v", u.Extra)
	}
	if u := (&serviceAccountInfo{Namespace: "ns", Name: "sa"}).user(); u.Extra != nil {
		t.Errorf("unbound token without an ID: extra %v", u.Extra)
	}
}

// The authenticator knows only its issuer's tokens; it accepts those it signed for the audiences asked for
// (its own when none are asked), and says why it refuses the others.
func TestServiceAccountsAuthenticate(t *testing.T) {
	objs := testObjects()
	clk := clocktesting.NewFakePassiveClock(tokenEpoch)
	sas := NewServiceAccounts(testKey(t, false), "https://issuer", []string{"https://issuer"}, objs, clk)
	other := NewServiceAccounts(testKey(t, false), "https://issuer", []string{"https://issuer"}, objs, clk)
	foreign := NewServiceAccounts(testKey(t, false), "https://elsewhere", []string{"https://issuer"}, objs, clk)
	subj := rest.TokenSubject{ServiceAccount: objs.sas["ns/sa"], Pod: objs.pods["ns/p"], Node: objs.nodes["n1"]}
	issue := func(s *ServiceAccounts, auds ...string) string {
		tok, err := s.IssueToken(subj, auds, tokenEpoch, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	withAuds := func(auds ...string) context.Context { return WithAudiences(context.Background(), auds) }
	for _, tc := range []struct {
		name     string
		token    string
		ctx      context.Context
		known    bool
		wantErr  string
		wantAuds []string
	}{
		{"own audience", issue(sas, "https://issuer"), context.Background(), true, "", []string{"https://issuer"}},
		{"no audience means the server's", issue(sas), context.Background(), true, "", []string{"https://issuer"}},
		{"asked for one of the token's", issue(sas, "vault", "x"), withAuds("y", "x"), true, "", []string{"x"}},
		{"asked for another", issue(sas, "vault"), withAuds("https://issuer"), false, "is invalid for the target audiences", nil},
		{"another key", issue(other), context.Background(), false, "invalid signature", nil},
		{"another issuer", issue(foreign), context.Background(), false, "", nil},
		{"not a JWT", "static-token", context.Background(), false, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, ok, err := sas.AuthenticateToken(tc.ctx, tc.token)
			if ok != tc.known || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, %v; want %v, %q", ok, err, tc.known, tc.wantErr)
			}
			if ok && (!reflect.DeepEqual(resp.Audiences, tc.wantAuds) || resp.User.Extra["authentication.kubernetes.io/pod-name"][0] != "p") {
				t.Errorf("response %+v", resp)
			}
		})
	}
	// Once its pod is gone, a token stops validating.
	tok := issue(sas)
	delete(objs.pods, "ns/p")
	if _, ok, err := sas.AuthenticateToken(context.Background(), tok); ok || err == nil {
		t.Errorf("token of a deleted pod: %v, %v", ok, err)
	}
}

// Static tokens hold for the server's audiences only, as kube-apiserver's audience-agnostic authenticators.
func TestAudienceAgnostic(t *testing.T) {
	a := AudienceAgnostic{Implicit: []string{"api"}, Tokens: StaticTokens{"t": {Name: "alice"}}}
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		ok       bool
		wantAuds []string
	}{
		{"no audiences asked", context.Background(), true, nil},
		{"the server's", WithAudiences(context.Background(), []string{"x", "api"}), true, []string{"api"}},
		{"another", WithAudiences(context.Background(), []string{"kubelet"}), false, nil},
	} {
		resp, ok, err := a.AuthenticateToken(tc.ctx, "t")
		if err != nil || ok != tc.ok || ok && !reflect.DeepEqual(resp.Audiences, tc.wantAuds) {
			t.Errorf("%s: %+v %v %v", tc.name, resp, ok, err)
		}
	}
}
