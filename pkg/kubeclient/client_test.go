package kubeclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// request is what the test server saw.
type request struct{ method, path, query, accept, contentType string }

// server answers every request with body, as JSON, and records the requests.
func server(t *testing.T, body any) (*rest.Config, func() []request) {
	t.Helper()
	var mu sync.Mutex
	var seen []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept"), r.Header.Get("Content-Type")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, QPS: -1}, func() []request {
		mu.Lock()
		defer mu.Unlock()
		return append([]request(nil), seen...)
	}
}

func newClient(t *testing.T, cfg *rest.Config) Interface {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRequestsGoWhereClientGoSendsThem(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	lease := &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for _, tc := range []struct {
		name string
		body any
		call func(Interface) (string, error)
		want request
	}{
		{"get pod", pod, func(c Interface) (string, error) {
			p, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
			return name(p, err)
		}, request{method: "GET", path: "/api/v1/namespaces/ns/pods/p"}},
		{"list pods on a node", &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}, func(c Interface) (string, error) {
			_, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1", ResourceVersion: "0"})
			return "", err
		}, request{method: "GET", path: "/api/v1/pods", query: "fieldSelector=spec.nodeName%3Dn1&resourceVersion=0"}},
		{"patch pod status", pod, func(c Interface) (string, error) {
			p, err := c.CoreV1().Pods("ns").Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
			return name(p, err)
		}, request{method: "PATCH", path: "/api/v1/namespaces/ns/pods/p/status", contentType: "application/strategic-merge-patch+json"}},
		{"delete pod with grace", nil, func(c Interface) (string, error) {
			zero := int64(0)
			return "", c.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}, request{method: "DELETE", path: "/api/v1/namespaces/ns/pods/p"}},
		{"get secret", &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "s"}}, func(c Interface) (string, error) {
			s, err := c.CoreV1().Secrets("ns").Get(ctx, "s", metav1.GetOptions{})
			return name(s, err)
		}, request{method: "GET", path: "/api/v1/namespaces/ns/secrets/s"}},
		{"get node", &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, func(c Interface) (string, error) {
			n, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			return name(n, err)
		}, request{method: "GET", path: "/api/v1/nodes/n1"}},
		{"create lease", lease, func(c Interface) (string, error) {
			l, err := c.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{})
			return name(l, err)
		}, request{method: "POST", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, seen := server(t, tc.body)
			got, err := tc.call(newClient(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			if m, ok := tc.body.(metav1.Object); ok && got != m.GetName() {
				t.Errorf("decoded name %q, want %q", got, m.GetName())
			}
			reqs := seen()
			if len(reqs) != 1 {
				t.Fatalf("requests %+v, want one", reqs)
			}
			r := reqs[0]
			if r.method != tc.want.method || r.path != tc.want.path || (tc.want.query != "" && r.query != tc.want.query) {
				t.Errorf("request %s %s?%s, want %s %s?%s", r.method, r.path, r.query, tc.want.method, tc.want.path, tc.want.query)
			}
			if tc.want.contentType != "" && r.contentType != tc.want.contentType {
				t.Errorf("content type %q, want %q", r.contentType, tc.want.contentType)
			}
			// As client-go's generated clients: protobuf preferred, JSON accepted.
			if !strings.HasPrefix(r.accept, "application/vnd.kubernetes.protobuf") || !strings.Contains(r.accept, "application/json") {
				t.Errorf("Accept %q, want protobuf first, then JSON", r.accept)
			}
		})
	}
}

func name(o metav1.Object, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return o.GetName(), nil
}

func TestEventSinkWritesInTheEventsNamespace(t *testing.T) {
	ev := &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}, ObjectMeta: metav1.ObjectMeta{Name: "e.1", Namespace: "ns"}}
	cfg, seen := server(t, ev)
	sink := EventSink(newClient(t, cfg))
	if _, err := sink.Create(ev); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Patch(ev, []byte(`{"count":2}`)); err != nil {
		t.Fatal(err)
	}
	reqs := seen()
	want := []request{{method: "POST", path: "/api/v1/namespaces/ns/events"}, {method: "PATCH", path: "/api/v1/namespaces/ns/events/e.1"}}
	if len(reqs) != len(want) {
		t.Fatalf("requests %+v", reqs)
	}
	for i, w := range want {
		if reqs[i].method != w.method || reqs[i].path != w.path {
			t.Errorf("request %d: %s %s, want %s %s", i, reqs[i].method, reqs[i].path, w.method, w.path)
		}
	}
	if _, err := sink.Patch(&corev1.Event{}, []byte(`{}`)); err == nil {
		t.Error("patch of an event without a name: no error")
	}
}

func TestQPSWithoutBurstIsRefused(t *testing.T) {
	if _, err := New(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5}); err == nil {
		t.Error("QPS 5 with burst 0: no error")
	}
}

// One rate limiter serves both API groups, as in client-go's clientset.
func TestGroupsShareOneRateLimiter(t *testing.T) {
	cfg, _ := server(t, &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}})
	cfg.QPS, cfg.Burst = 5, 10
	c := newClient(t, cfg).(*client)
	core := c.core.rc.(*rest.RESTClient).GetRateLimiter()
	coord := c.coordination.rc.(*rest.RESTClient).GetRateLimiter()
	if core == nil || core != coord {
		t.Errorf("rate limiters %p and %p, want one shared", core, coord)
	}
}
