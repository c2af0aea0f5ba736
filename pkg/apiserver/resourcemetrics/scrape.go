package resourcemetrics

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultInterval is metrics-server's default resolution.
const DefaultInterval = 15 * time.Second

// maxBody bounds what one kubelet's /metrics/resource may send.
const maxBody = 16 << 20

// Config is what a Scraper needs.
type Config struct {
	// Nodes returns the nodes to scrape.
	Nodes func() []*corev1.Node
	// Fetch reads a node's kubelet /metrics/resource.
	Fetch func(ctx context.Context, node *corev1.Node) (io.ReadCloser, error)
	// Pods returns a namespace's pods ("" for all), for their labels and for selectors.
	Pods     func(namespace string) []*corev1.Pod
	Interval time.Duration
	Clock    clock.WithTicker
}

// sample is one cumulative CPU reading and the memory working set, at the time the kubelet read them.
type sample struct {
	at     time.Time
	cpu    float64 // core-seconds
	memory float64 // bytes
	hasCPU bool
	hasMem bool
}

// series are the last two samples of one node, pod or container.
type series struct{ prev, cur sample }

func (s *series) add(v sample) {
	if !v.at.After(s.cur.at) {
		return // the kubelet has not gathered since
	}
	s.prev, s.cur = s.cur, v
}

// usage is the CPU rate (cores) between the two samples and the last working set; ok is false before two
// CPU samples exist or when the counter went back (a restarted container).
func (s *series) usage() (cpu, memory float64, window time.Duration, ok bool) {
	window = s.cur.at.Sub(s.prev.at)
	if !s.prev.hasCPU || !s.cur.hasCPU || !s.cur.hasMem || window <= 0 || s.cur.cpu < s.prev.cpu {
		return 0, 0, 0, false
	}
	return (s.cur.cpu - s.prev.cpu) / window.Seconds(), s.cur.memory, window, true
}

// nodeData is what was scraped from one node.
type nodeData struct {
	node       series
	pods       map[podKey]*series
	containers map[podKey]map[string]*series
}

type podKey struct{ namespace, name string }

// Scraper scrapes the kubelets and serves metrics.k8s.io. It is safe for concurrent use.
type Scraper struct {
	cfg Config

	mu    sync.Mutex
	nodes map[string]*nodeData
	uids  map[string]types.UID // node name -> UID, to forget a node recreated under its name
}

// New returns a Scraper; Run scrapes.
func New(cfg Config) *Scraper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Scraper{cfg: cfg, nodes: map[string]*nodeData{}, uids: map[string]types.UID{}}
}

// Run scrapes every node every Interval until ctx is done.
func (s *Scraper) Run(ctx context.Context) {
	t := s.cfg.Clock.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.ScrapeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// ScrapeAll scrapes every node once, in parallel, each within the interval.
func (s *Scraper) ScrapeAll(ctx context.Context) {
	nodes := s.cfg.Nodes()
	live := map[string]bool{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		live[n.Name] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, s.cfg.Interval)
			defer cancel()
			if err := s.scrape(sctx, n); err != nil {
				klog.FromContext(ctx).V(2).Info("Failed to scrape a kubelet's resource metrics", "node", n.Name, "err", err)
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	for name := range s.nodes {
		if !live[name] {
			delete(s.nodes, name)
			delete(s.uids, name)
		}
	}
	s.mu.Unlock()
}

func (s *Scraper) scrape(ctx context.Context, n *corev1.Node) error {
	body, err := s.cfg.Fetch(ctx, n)
	if err != nil {
		return err
	}
	defer body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(body, maxBody))
	if err != nil {
		return fmt.Errorf("parse /metrics/resource: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if uid, ok := s.uids[n.Name]; ok && uid != n.UID {
		delete(s.nodes, n.Name)
	}
	s.uids[n.Name] = n.UID
	d := s.nodes[n.Name]
	if d == nil {
		d = &nodeData{pods: map[podKey]*series{}, containers: map[podKey]map[string]*series{}}
		s.nodes[n.Name] = d
	}
	node := sample{}
	pods := map[podKey]*sample{}
	ctrs := map[podKey]map[string]*sample{}
	podOf := func(m *dto.Metric) podKey { return podKey{label(m, "namespace"), label(m, "pod")} }
	at := func(m *dto.Metric) time.Time { return time.UnixMilli(m.GetTimestampMs()) }
	for name, fam := range families {
		for _, m := range fam.Metric {
			var dst *sample
			switch name {
			case "node_cpu_usage_seconds_total", "node_memory_working_set_bytes":
				dst = &node
			case "pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes":
				k := podOf(m)
				if pods[k] == nil {
					pods[k] = &sample{}
				}
				dst = pods[k]
			case "container_cpu_usage_seconds_total", "container_memory_working_set_bytes":
				k := podOf(m)
				if ctrs[k] == nil {
					ctrs[k] = map[string]*sample{}
				}
				c := label(m, "container")
				if ctrs[k][c] == nil {
					ctrs[k][c] = &sample{}
				}
				dst = ctrs[k][c]
			default:
				continue
			}
			if t := at(m); t.After(dst.at) {
				dst.at = t
			}
			if m.Counter != nil {
				dst.cpu, dst.hasCPU = m.Counter.GetValue(), true
			} else if m.Gauge != nil {
				dst.memory, dst.hasMem = m.Gauge.GetValue(), true
			}
		}
	}
	d.node.add(node)
	for k, v := range pods {
		if d.pods[k] == nil {
			d.pods[k] = &series{}
		}
		d.pods[k].add(*v)
	}
	for k := range d.pods {
		if pods[k] == nil {
			delete(d.pods, k)
		}
	}
	for k, cs := range ctrs {
		if d.containers[k] == nil {
			d.containers[k] = map[string]*series{}
		}
		for c, v := range cs {
			if d.containers[k][c] == nil {
				d.containers[k][c] = &series{}
			}
			d.containers[k][c].add(*v)
		}
		for c := range d.containers[k] {
			if cs[c] == nil {
				delete(d.containers[k], c)
			}
		}
	}
	for k := range d.containers {
		if ctrs[k] == nil {
			delete(d.containers, k)
		}
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
