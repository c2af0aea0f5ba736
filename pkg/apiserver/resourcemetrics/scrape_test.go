package resourcemetrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// kubelet serves /metrics/resource as upstream's kubelet writes it, at the time and values set.
type kubelet struct {
	ms              int64 // sample time, unix milliseconds
	nodeCPU, podCPU float64
	nodeMem, ctrMem float64
	fail            bool
}

func (k *kubelet) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total %g %d\n", k.nodeCPU, k.ms)
	fmt.Fprintf(&b, "# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes %g %d\n", k.nodeMem, k.ms)
	fmt.Fprintf(&b, "# TYPE pod_cpu_usage_seconds_total counter\npod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} %g %d\n", k.podCPU, k.ms)
	fmt.Fprintf(&b, "# TYPE pod_memory_working_set_bytes gauge\npod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} %g %d\n", k.ctrMem, k.ms)
	fmt.Fprintf(&b, "# TYPE container_cpu_usage_seconds_total counter\ncontainer_cpu_usage_seconds_total{container=\"app\",namespace=\"default\",pod=\"web\"} %g %d\n", k.podCPU, k.ms)
	fmt.Fprintf(&b, "# TYPE container_memory_working_set_bytes gauge\ncontainer_memory_working_set_bytes{container=\"app\",namespace=\"default\",pod=\"web\"} %g %d\n", k.ctrMem, k.ms)
	b.WriteString("# TYPE resource_scrape_error gauge\nresource_scrape_error 0\n")
	return b.String()
}

func TestScraper(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", Labels: map[string]string{"pool": "a"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "n1"}}
	k := &kubelet{ms: 1_000_000, nodeCPU: 100, podCPU: 10, nodeMem: 4 << 30, ctrMem: 64 << 20}
	s := New(Config{
		Nodes: func() []*corev1.Node { return []*corev1.Node{node} },
		Pods:  func(string) []*corev1.Pod { return []*corev1.Pod{pod} },
		Fetch: func(context.Context, *corev1.Node) (io.ReadCloser, error) {
			if k.fail {
				return nil, errors.New("connection refused")
			}
			return io.NopCloser(strings.NewReader(k.text())), nil
		},
	})
	serve := func(req Request) (int, string) {
		w := httptest.NewRecorder()
		s.Serve(w, req)
		return w.Code, w.Body.String()
	}
	ctx := context.Background()
	s.ScrapeAll(ctx)
	if code, body := serve(Request{Resource: "nodes", Name: "n1"}); code != 404 {
		t.Errorf("a node with one sample: %d %s", code, body)
	}
	// Ten seconds later: 15 core-seconds more on the node (1.5 cores), 5 in the pod (half a core).
	k.ms += 10_000
	k.nodeCPU += 15
	k.podCPU += 5
	s.ScrapeAll(ctx)
	code, body := serve(Request{Resource: "nodes", Name: "n1"})
	var nm metricsv1beta1.NodeMetrics
	if code != 200 || json.Unmarshal([]byte(body), &nm) != nil {
		t.Fatalf("node metrics: %d %s", code, body)
	}
	if cpu := nm.Usage.Cpu().MilliValue(); cpu != 1500 || nm.Usage.Memory().Value() != 4<<30 || nm.Window.Duration.Seconds() != 10 {
		t.Errorf("node usage %v over %v, want 1500m and 4Gi over 10s", nm.Usage, nm.Window)
	}
	code, body = serve(Request{Resource: "pods", Namespace: "default", LabelSelector: "app=web"})
	var pl metricsv1beta1.PodMetricsList
	if code != 200 || json.Unmarshal([]byte(body), &pl) != nil || len(pl.Items) != 1 || len(pl.Items[0].Containers) != 1 {
		t.Fatalf("pod metrics: %d %s", code, body)
	}
	if c := pl.Items[0].Containers[0]; c.Name != "app" || c.Usage.Cpu().MilliValue() != 500 || c.Usage.Memory().Value() != 64<<20 {
		t.Errorf("container usage %+v", c)
	}
	if _, body := serve(Request{Resource: "pods", Namespace: "default", LabelSelector: "app=db"}); strings.Contains(body, `"web"`) {
		t.Errorf("a selector that matches nothing: %s", body)
	}
	if code, _ := serve(Request{Resource: "pods", LabelSelector: "a in (b"}); code != 400 {
		t.Errorf("a bad selector: %d", code)
	}
	if code, _ := serve(Request{Resource: "pods", Namespace: "default", Name: "nope"}); code != 404 {
		t.Errorf("an unknown pod: %d", code)
	}
	// A kubelet that does not answer keeps its last figures; a sample no newer than the last is ignored.
	k.fail = true
	s.ScrapeAll(ctx)
	k.fail = false
	s.ScrapeAll(ctx)
	if code, _ := serve(Request{Resource: "nodes", Name: "n1"}); code != 200 {
		t.Errorf("after a failed scrape: %d", code)
	}
	// A restarted container's counter goes back: no figure until two samples of the new one.
	k.ms += 10_000
	k.podCPU = 1
	s.ScrapeAll(ctx)
	if _, body := serve(Request{Resource: "pods", Namespace: "default", Name: "web"}); strings.Contains(body, `"cpu"`) {
		t.Errorf("a counter that went back gave a figure: %s", body)
	}
	// A gone node is forgotten.
	node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	s.ScrapeAll(ctx)
	if len(s.nodes) != 1 || s.nodes["n1"] != nil {
		t.Errorf("nodes kept: %v", s.nodes)
	}
}
