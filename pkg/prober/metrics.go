package prober

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// durationBuckets are Prometheus' default histogram buckets, which upstream's prober_probe_duration_seconds
// uses, in seconds.
var durationBuckets = prometheus.DefBuckets

// durationKey labels prober_probe_duration_seconds: no result and no pod UID, as upstream's.
type durationKey struct {
	Type                      Type
	Container, Pod, Namespace string
}

// lateBuckets bound prober_probe_start_lateness_seconds: a probe starts within a millisecond of its tick on
// an idle node.
var lateBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// histogram counts observations per bucket, with their sum.
type histogram struct {
	bounds  []float64 // upper bounds; durationBuckets when nil
	buckets []uint64
	count   uint64
	sum     float64
}

func (h *histogram) observe(d time.Duration) {
	if h.bounds == nil {
		h.bounds = durationBuckets
	}
	if h.buckets == nil {
		h.buckets = make([]uint64, len(h.bounds))
	}
	s := d.Seconds()
	for i, b := range h.bounds {
		if s <= b {
			h.buckets[i]++
			break
		}
	}
	h.count++
	h.sum += s
}

// cumulative is the histogram as Prometheus writes it: the count of observations at or below each bound.
func (h *histogram) cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, len(h.bounds))
	var cum uint64
	for i, le := range h.bounds {
		if i < len(h.buckets) {
			cum += h.buckets[i]
		}
		out[le] = cum
	}
	return out
}

// The series of /metrics/probes, as upstream's kubelet serves them, and how late probes start.
var (
	probeTotalDesc = prometheus.NewDesc("prober_probe_total",
		"[BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
		[]string{"container", "namespace", "pod", "pod_uid", "probe_type", "result"}, nil)
	probeDurationDesc = prometheus.NewDesc("prober_probe_duration_seconds",
		"[ALPHA] Duration in seconds for a probe response.", []string{"container", "namespace", "pod", "probe_type"}, nil)
	probeLatenessDesc = prometheus.NewDesc("prober_probe_start_lateness_seconds",
		"How long after its period's tick each probe of the node started.", nil, nil)
)

// Describe and Collect make the manager a Prometheus collector of prober_probe_total,
// prober_probe_duration_seconds and prober_probe_start_lateness_seconds.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	ch <- probeTotalDesc
	ch <- probeDurationDesc
	ch <- probeLatenessDesc
}

// Collect writes the probes' series as they stand.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for c, v := range m.counts {
		ch <- prometheus.MustNewConstMetric(probeTotalDesc, prometheus.CounterValue, float64(v),
			c.Container, c.Namespace, c.Pod, string(c.PodUID), string(c.Type), c.Result)
	}
	for k, h := range m.durations {
		ch <- prometheus.MustNewConstHistogram(probeDurationDesc, h.count, h.sum, h.cumulative(),
			k.Container, k.Namespace, k.Pod, string(k.Type))
	}
	ch <- prometheus.MustNewConstHistogram(probeLatenessDesc, m.lateness.count, m.lateness.sum, m.lateness.cumulative())
}
