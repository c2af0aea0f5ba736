package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/kubelet/pkg/debugpage"
)

func TestStatusEndpoints(t *testing.T) {
	var summary *statsapi.Summary
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_started_pods_total", Help: "Pods started."})
	c.Add(3)
	reg.MustRegister(c)
	f := newFixture(t, func(cfg *Config) {
		cfg.Status = StatusSources{
			Metrics: map[string]prometheus.Gatherer{"/metrics": reg},
			Summary: func() *statsapi.Summary { return summary },
			Pods:    func() []*v1.Pod { return []*v1.Pod{testPod(1)} },
			RunningPods: func(context.Context) ([]*v1.Pod, error) {
				return []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}}, nil
			},
			Configz: func() any { return map[string]int{"maxPods": 110} },
		}
	})
	base := "https://" + f.srv.Addr()
	if code, body := get(t, f.admin(), base+"/stats/summary"); code != http.StatusServiceUnavailable {
		t.Errorf("summary before the first gathering: %d %q", code, body)
	}
	n := uint64(5)
	summary = &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node-a", CPU: &statsapi.CPUStats{UsageNanoCores: &n}},
		Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Name: "web"}, Network: &statsapi.NetworkStats{}}}}
	code, body := get(t, f.admin(), base+"/stats/summary")
	var got statsapi.Summary
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || got.Node.NodeName != "node-a" || got.Pods[0].Network == nil {
		t.Errorf("summary: %d %q", code, body)
	}
	if code, body := get(t, f.admin(), base+"/stats/summary?only_cpu_and_memory=true"); code != 200 || strings.Contains(body, "network") {
		t.Errorf("cpu and memory only: %d %q", code, body)
	}
	if code, _ := get(t, f.admin(), base+"/stats/summary?only_cpu_and_memory=maybe"); code != 400 {
		t.Errorf("a bad only_cpu_and_memory: %d", code)
	}
	if code, body := get(t, f.admin(), base+"/metrics"); code != 200 || !strings.Contains(body, "kubelet_started_pods_total 3") {
		t.Errorf("/metrics: %d %q", code, body)
	}
	if code, _ := get(t, f.admin(), base+"/metrics/cadvisor"); code != 404 {
		t.Errorf("a registry not given: %d", code)
	}
	var pods v1.PodList
	if code, body := get(t, f.admin(), base+"/pods"); code != 200 || json.Unmarshal([]byte(body), &pods) != nil ||
		pods.Kind != "PodList" || len(pods.Items) != 1 || pods.Items[0].Name != "web" {
		t.Errorf("/pods: %d %q", code, body)
	}
	if code, body := get(t, f.admin(), base+"/runningpods/"); code != 200 || !strings.Contains(body, `"name":"web"`) {
		t.Errorf("/runningpods/: %d %q", code, body)
	}
	if code, body := get(t, f.admin(), base+"/configz"); code != 200 || body != `{"kubeletconfig":{"maxPods":110}}` {
		t.Errorf("/configz: %d %q", code, body)
	}
	if code, _ := get(t, f.admin(), base+"/nothing/here"); code != 404 {
		t.Errorf("an unknown path: %d", code)
	}
	// An ordinary user is refused every one of them.
	user := f.client(f.ca, "jane")
	for _, p := range []string{"/stats/summary", "/metrics", "/pods", "/runningpods/", "/configz"} {
		if code, _ := get(t, user, base+p); code != http.StatusForbidden {
			t.Errorf("%s for an ordinary user: %d", p, code)
		}
	}
}

// /logs/ serves the node's log directory; links are followed inside it and refused out of it.
func TestNodeLogs(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	mustWrite := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(filepath.Join(root, "pods", "ns_web_u1", "app", "0.log"), "hello\n")
	mustWrite(filepath.Join(root, "syslog"), "booted\n")
	mustWrite(filepath.Join(root, "javascript:alert(document.domain)"), "a name a pod could choose\n")
	mustWrite(filepath.Join(outside, "secret"), "s3cret\n")
	for link, target := range map[string]string{
		"containers/web_ns_app-c1.log": filepath.Join(root, "pods", "ns_web_u1", "app", "0.log"), // absolute, inside
		"relative.log":                 "pods/ns_web_u1/app/0.log",
		"escape-abs":                   filepath.Join(outside, "secret"),
		"escape-rel":                   "../" + filepath.Base(outside) + "/secret",
		"escape-dir":                   outside,
		"loop":                         "loop",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, func(cfg *Config) { cfg.Status.NodeLogsDir = root })
	base := "https://" + f.srv.Addr() + "/logs/"
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"syslog", 200, "booted\n"},
		{"containers/web_ns_app-c1.log", 200, "hello\n"},
		{"relative.log", 200, "hello\n"},
		{"", 200, `<a href="./containers/">containers/</a>`},
		{"", 200, `<a href="./javascript:alert%28document.domain%29">javascript:alert(document.domain)</a>`},
		{"escape-abs", 403, ""},
		{"escape-rel", 403, ""},
		{"escape-dir/secret", 403, ""},
		{"loop", 403, ""},
		{"missing", 404, ""},
		{"%2e%2e/%2e%2e/etc/passwd", 404, ""},
	} {
		code, body := get(t, f.admin(), base+tc.path)
		if code != tc.code || !strings.Contains(body, tc.body) || strings.Contains(body, "s3cret") {
			t.Errorf("/logs/%s: %d %q, want %d with %q", tc.path, code, body, tc.code, tc.body)
		}
	}
	if code, _ := get(t, f.client(f.ca, "jane"), base+"syslog"); code != http.StatusForbidden {
		t.Errorf("/logs/ for an ordinary user: %d", code)
	}
	resp, err := f.admin().Get(base)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); csp != debugpage.ContentSecurityPolicy {
		t.Errorf("/logs/ listing Content-Security-Policy %q, want the debug page's %q", csp, debugpage.ContentSecurityPolicy)
	}
}

// A listing's links stay relative to the directory whatever the file is named: no name forms a link of
// another scheme or host, nor breaks out of the attribute or the element.
func TestListEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  bool
		want string
	}{
		{"0.log", false, `<a href="./0.log">0.log</a>` + "\n"},
		{"pods", true, `<a href="./pods/">pods/</a>` + "\n"},
		{"javascript:alert(1)", false, `<a href="./javascript:alert%281%29">javascript:alert(1)</a>` + "\n"},
		{"data:text/html,x", false, `<a href="./data:text%2Fhtml%2Cx">data:text/html,x</a>` + "\n"},
		{"//evil.example", true, `<a href="./%2F%2Fevil.example/">//evil.example/</a>` + "\n"},
		{`a"><script>x</script>`, false, `<a href="./a%22%3E%3Cscript%3Ex%3C%2Fscript%3E">a&#34;&gt;&lt;script&gt;x&lt;/script&gt;</a>` + "\n"},
		{"a&b c#d?e", false, `<a href="./a&amp;b%20c%23d%3Fe">a&amp;b c#d?e</a>` + "\n"},
	} {
		if got := listEntry(tc.name, tc.dir); got != tc.want {
			t.Errorf("listEntry(%q, %v) = %q, want %q", tc.name, tc.dir, got, tc.want)
		}
	}
}
