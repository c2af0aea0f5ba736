package debugpage

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	p := &Page{Generated: now, Node: Node{Name: "n1", Ready: false, ReadyMessage: "PLEG is not healthy",
		Failures: []string{"pleg: stuck"}, LastRelist: now.Add(-2 * time.Second), RelistTook: 3 * time.Millisecond,
		Stuck: []Stuck{{Pod: "default/hung", Call: "ContainerStatus", Since: 12 * time.Second}}, RuntimeReady: true, NetworkReady: true,
		APIReachable: true, LastLease: now.Add(-5 * time.Second), CgroupMode: "v1", CgroupDriver: "cgroupfs",
		Offline: &Offline{Since: now.Add(-time.Minute), Pods: []string{"kube-system/agent", "default/web"}},
		Devices: []DeviceResource{{Name: "example.com/gpu", Plugin: "gpu.sock", Devices: 4, Healthy: 3, Held: 2},
			{Name: "example.com/nic", PluginGone: 90 * time.Second, Devices: 2}}},
		Pods: []Pod{{Namespace: "default", Name: "<script>alert(1)</script>", UID: "u1", State: "Syncing", Phase: "Running",
			WhyNotReady: `the readiness probe of container app fails: <b>503</b>`,
			Timeline:    []Step{{Name: "sandbox", At: now, Took: time.Second, Detail: "10.88.0.5", Slowest: true}},
			Backoffs:    []Backoff{{What: "container app", Reason: "CrashLoopBackOff", Until: now.Add(20 * time.Second)}},
			Probes:      []Probe{{Container: "app", Type: "Readiness", Result: "failed", Output: "<i>down</i>", At: now}}}}}
	h := Handler(func() *Page { return p })

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/debug/pods", nil))
	body := w.Body.String()
	for _, bad := range []string{"<script>alert", "<b>503</b>", "<i>down</i>"} {
		if strings.Contains(body, bad) {
			t.Errorf("unescaped %q in the page", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "NotReady", "ContainerStatus of pod default/hung",
		`class="slowest"`, "CrashLoopBackOff", "in 20s",
		"plugin gpu.sock: 4 devices, 3 healthy, 2 held by containers", "running from the checkpoint</span> for 1m0s: kube-system/agent, default/web", "plugin gone 1m30s ago", `<span data-field="whyPrefix">Not Ready: </span><span data-field="whyNotReady">the readiness probe`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	csp := w.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, scriptHash) {
		t.Errorf("CSP %q", csp)
	}
	if !strings.Contains(body, "<script>"+refreshScript+"</script>") {
		t.Error("the script on the page is not the one the CSP allows")
	}

	w = httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/debug/pods", nil)
	r.Header.Set("Accept", "application/json")
	h.ServeHTTP(w, r)
	var got Page
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got.Pods) != 1 || got.Pods[0].Name != "<script>alert(1)</script>" {
		t.Errorf("JSON %v: %s", err, w.Body.String())
	}

	// A page with nothing on it still renders.
	p = &Page{Generated: now}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/debug/pods", nil))
	if w.Code != 200 || !strings.Contains(w.Body.String(), "Pods (0)") {
		t.Errorf("empty page: %d %s", w.Code, w.Body.String())
	}
}
