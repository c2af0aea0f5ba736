package discovery

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

func get(t *testing.T, h *Handler, path string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code == http.StatusOK && v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, rec.Body.String())
		}
	}
	return rec.Code
}

// What kubectl reads first: the core resources with their verbs and subresources, the groups, and a group
// served beside the registry.
func TestDiscoveryDocuments(t *testing.T) {
	metricsGroup := &metav1.APIResourceList{GroupVersion: "metrics.k8s.io/v1beta1",
		APIResources: []metav1.APIResource{{Name: "pods", Kind: "PodMetrics", Namespaced: true, Verbs: []string{"get", "list"}}}}
	h := New(registry.New(), metricsGroup)

	var core metav1.APIResourceList
	if code := get(t, h, "/api/v1", &core); code != http.StatusOK {
		t.Fatalf("/api/v1: %d", code)
	}
	byName := map[string]metav1.APIResource{}
	for _, r := range core.APIResources {
		byName[r.Name] = r
	}
	pods, ok := byName["pods"]
	if !ok || !pods.Namespaced || pods.Kind != "Pod" || !slices.Contains(pods.Verbs, "watch") || !slices.Contains(pods.ShortNames, "po") {
		t.Errorf("pods in /api/v1: %+v", pods)
	}
	if nodes := byName["nodes"]; nodes.Namespaced {
		t.Errorf("nodes are namespaced in /api/v1: %+v", nodes)
	}
	for sub, kind := range map[string]string{"pods/log": "Pod", "pods/exec": "PodExecOptions", "pods/eviction": "Eviction",
		"serviceaccounts/token": "TokenRequest", "pods/status": "Pod"} {
		if r, ok := byName[sub]; !ok || r.Kind != kind {
			t.Errorf("%s in /api/v1: %+v, want kind %s", sub, r, kind)
		}
	}

	var groups metav1.APIGroupList
	get(t, h, "/apis", &groups)
	names := map[string]bool{}
	for _, g := range groups.Groups {
		names[g.Name] = true
		if g.PreferredVersion.Version == "" || len(g.Versions) == 0 {
			t.Errorf("group %s without a preferred version", g.Name)
		}
	}
	for _, want := range []string{"events.k8s.io", "coordination.k8s.io", "metrics.k8s.io"} {
		if !names[want] {
			t.Errorf("/apis lacks %s: %v", want, names)
		}
	}
	var leases metav1.APIResourceList
	if code := get(t, h, "/apis/coordination.k8s.io/v1", &leases); code != http.StatusOK || len(leases.APIResources) == 0 {
		t.Errorf("/apis/coordination.k8s.io/v1: %d, %+v", code, leases)
	}
	var m metav1.APIResourceList
	if get(t, h, "/apis/metrics.k8s.io/v1beta1", &m); len(m.APIResources) != 1 || m.APIResources[0].Kind != "PodMetrics" {
		t.Errorf("the group served beside the registry: %+v", m)
	}
	var g metav1.APIGroup
	if code := get(t, h, "/apis/events.k8s.io", &g); code != http.StatusOK || g.Name != "events.k8s.io" || g.Kind != "APIGroup" {
		t.Errorf("/apis/events.k8s.io: %d %+v", code, g)
	}
	var v struct{ GitVersion string }
	if get(t, h, "/version", &v); v.GitVersion != GitVersion {
		t.Errorf("/version: %+v", v)
	}
	for _, missing := range []string{"/apis/nope", "/apis/nope/v1", "/apis/events.k8s.io/v9"} {
		if code := get(t, h, missing, nil); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", missing, code)
		}
	}
}

func TestServes(t *testing.T) {
	h := New(registry.New())
	for path, want := range map[string]bool{
		"/version": true, "/api": true, "/api/v1": true, "/apis": true, "/apis/apps": true, "/apis/apps/v1": true,
		"/api/v1/pods": false, "/apis/apps/v1/deployments": false, "/healthz": false, "/": false,
	} {
		if got := h.Serves(path); got != want {
			t.Errorf("Serves(%q) = %v, want %v", path, got, want)
		}
	}
}
