//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/pkg/debugpage"
)

// artifactsDir is where tests leave what a person looks at afterwards (screenshots): E2E_ARTIFACTS, else
// /tmp/nodeagent-e2e-artifacts.
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("E2E_ARTIFACTS")
	if dir == "" {
		dir = "/tmp/nodeagent-e2e-artifacts"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// debugPods reads the debug page's JSON through the API server; from the kubelet's endpoint itself, with
// the administrator's certificate, on a real control plane (kube-apiserver does not proxy to a node on
// loopback).
func (n *node) debugPods() (debugpage.Page, error) {
	var p debugpage.Page
	var data []byte
	var err error
	if n.cp != nil {
		data, err = n.kubeletGet("/debug/pods")
	} else {
		data, err = n.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.name, "proxy", "debug", "pods").DoRaw(context.Background())
	}
	if err != nil {
		return p, fmt.Errorf("debug/pods: %v: %s", err, data)
	}
	return p, json.Unmarshal(data, &p)
}

// kubeletGet GETs path, as JSON, from the kubelet's endpoint as the control plane's administrator.
func (n *node) kubeletGet(path string) ([]byte, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.cp.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Host = n.kubeletURL(n.t)
	cfg.TLSClientConfig.Insecure, cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.CAData = true, "", nil // self-signed
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", resp.Status)
	}
	return data, err
}

func findPod(p debugpage.Page, name string) *debugpage.Pod {
	for i := range p.Pods {
		if p.Pods[i].Name == name {
			return &p.Pods[i]
		}
	}
	return nil
}

// The debug page says why each pod is not Ready, and shows each pod's startup timeline: its JSON through the
// API server, and its HTML opened in a real headless Chromium through kubectl proxy (a screenshot is kept as
// an artifact), with a probe's output that holds HTML shown as text.
func TestDebugPage(t *testing.T) {
	parallel(t)
	n := startNode(t)
	n.createPod(busyboxPod("running", "sleep", "3600"))
	n.createPod(busyboxPod("crasher", "sh", "-c", "exit 3"))
	missing := busyboxPod("no-image", "sleep", "3600")
	missing.Spec.Containers[0].Image = "localhost/not-there:1"
	missing.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	n.createPod(missing)
	probed := busyboxPod("probed", "sleep", "3600")
	probed.Spec.Containers[0].ReadinessProbe = probe(execHandler("sh", "-c", "echo '<b>not yet</b>'; exit 1"), 1)
	n.createPod(probed)
	web := busyboxPod("web", "sh", "-c", "mkdir -p /w; exec httpd -f -p 8080 -h /w")
	web.Spec.Containers[0].ReadinessProbe = probe(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}, 1)
	n.createPod(web)
	n.waitPod("running", 60*time.Second, "Ready", ready)

	want := map[string]string{
		"running":  "",
		"crasher":  "container main keeps crashing (last exit code 3, Error)",
		"no-image": `image localhost/not-there:1 cannot be pulled: ErrImageNeverPull`,
		"probed":   "the readiness probe of container main fails: <b>not yet</b>",
		"web":      "the readiness probe of container main fails: HTTP probe failed with statuscode: 404",
	}
	var page debugpage.Page
	eventually(t, 60*time.Second, "the page says why each pod is not Ready", func() error {
		var err error
		if page, err = n.debugPods(); err != nil {
			return err
		}
		for name, why := range want {
			p := findPod(page, name)
			if p == nil {
				return fmt.Errorf("%s missing", name)
			}
			if !strings.HasPrefix(p.WhyNotReady, why) || (why == "" && p.WhyNotReady != "") {
				return fmt.Errorf("%s: %q, want %q", name, p.WhyNotReady, why)
			}
		}
		return nil
	})
	if c := findPod(page, "crasher"); !strings.Contains(c.WhyNotReady, "next restart at") {
		t.Errorf("the crash loop's sentence lacks the next restart: %q", c.WhyNotReady)
	}
	eventually(t, 20*time.Second, "the running pod's whole timeline", func() error {
		var err error
		if page, err = n.debugPods(); err != nil {
			return err
		}
		var names []string
		for _, s := range findPod(page, "running").Timeline {
			names = append(names, s.Name)
		}
		got := strings.Join(names, ",")
		if !strings.Contains(got, "admitted,pod cgroup,volumes,sandbox and network,created main,started main") ||
			!strings.Contains(got, ",ready") || !strings.Contains(got, "Ready posted") ||
			strings.Index(got, "Ready posted") > strings.Index(got, "Ready seen") {
			return fmt.Errorf("timeline %s", got)
		}
		return nil
	})
	if !page.Node.Ready || page.Node.LastRelist.IsZero() || !page.Node.APIReachable || page.Node.CgroupDriver != "cgroupfs" {
		t.Errorf("node health %+v", page.Node)
	}

	// The HTML, in a real browser: what a person sees, JavaScript and all.
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is needed (make setup installs it): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	proxy := exec.CommandContext(ctx, kubectlPath, "--kubeconfig", filepath.Join(n.dir, "admin.kubeconfig"), "proxy", "--port", "0")
	out, err := proxy.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = proxy.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("kubectl proxy: %v", err)
	}
	addr := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
	url := fmt.Sprintf("http://%s/api/v1/nodes/%s/proxy/debug/pods", addr, n.name)
	shot := filepath.Join(artifactsDir(t), "debug-pods.png")
	browser := func(args ...string) string {
		t.Helper()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=4000", "--window-size=1280,2400"}
		cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
		defer ccancel()
		b, err := exec.CommandContext(cctx, chromium, append(append(base, args...), url)...).Output()
		if err != nil {
			t.Fatalf("chromium %v: %v", args, err)
		}
		return string(b)
	}
	// The page is a snapshot: the crasher is Ready for a moment each time it restarts (every 10 s, then 20 s),
	// when its sentence has no next restart. A person would reload; so does the test, up to three times.
	var dom string
	var lacks []string
	for try := 0; try < 3; try++ {
		dom, lacks = browser("--dump-dom"), nil
		for _, s := range []string{"Node e2e-node", "keeps crashing", "next restart at", "cannot be pulled",
			"&lt;b&gt;not yet&lt;/b&gt;", "sandbox and network", "Pods (5)"} {
			if !strings.Contains(dom, s) {
				lacks = append(lacks, s)
			}
		}
		if len(lacks) == 0 {
			break
		}
		t.Logf("the page in Chromium lacks %q; reloading", lacks)
		time.Sleep(time.Second)
	}
	for _, s := range lacks {
		t.Errorf("the page in Chromium lacks %q", s)
	}
	if strings.Contains(dom, "<b>not yet</b>") {
		t.Error("a probe's output was rendered as HTML")
	}
	browser("--screenshot=" + shot)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
		t.Errorf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot of the debug page: %s", shot)
}

// A runtime call that never returns (a wedged shim) does not stop the relists: the node stays Ready, other
// pods start, and the debug page names the stuck pod.
func TestHungStatusCallLeavesNodeReady(t *testing.T) {
	parallel(t)
	n := startNode(t)
	n.stop()
	n.start(failpoint.EnvVar + "=" + failpoint.HangContainerStatus + "=wedged")
	wedged := busyboxPod("wedged", "sleep", "3600")
	wedged.Spec.Containers[0].Name = "wedged"
	n.createPod(wedged)
	eventually(t, 90*time.Second, "the stuck pod on the debug page", func() error {
		page, err := n.debugPods()
		if err != nil {
			return err
		}
		for _, s := range page.Node.Stuck {
			if s.Pod == "default/wedged" {
				return nil
			}
		}
		return fmt.Errorf("stuck: %+v", page.Node.Stuck)
	})
	n.createPod(busyboxPod("other", "sleep", "3600"))
	n.waitPod("other", 60*time.Second, "another pod Ready", ready)
	time.Sleep(15 * time.Second) // several relists and a node status update
	nodeObj, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range nodeObj.Status.Conditions {
		if c.Type == v1.NodeReady && c.Status != v1.ConditionTrue {
			t.Errorf("the node is not Ready with one hung call: %s", c.Message)
		}
	}
	if h := string(n.raw(t, "healthz")); h != "ok" {
		t.Errorf("/healthz with one hung call: %q", h)
	}
	// Without the hang, the wedged pod is removed like any other when the test ends.
	n.stop()
	n.start()
}
