package stats

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The series of /metrics/resource, named and described as upstream's kubelet serves them (what metrics-server
// scrapes). Each sample carries the time it was read.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	ctrCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	ctrMemDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	ctrStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
	oldScrapeErrorDesc = prometheus.NewDesc("scrape_error",
		"[ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// ResourceCollector serves the last gathering as upstream's resource metrics (/metrics/resource).
func (c *Collector) ResourceCollector() prometheus.Collector { return resourceCollector{c} }

type resourceCollector struct{ c *Collector }

func (r resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemDesc, podCPUDesc, podMemDesc, ctrCPUDesc, ctrMemDesc,
		ctrStartDesc, scrapeErrorDesc, oldScrapeErrorDesc} {
		ch <- d
	}
}

func (r resourceCollector) Collect(ch chan<- prometheus.Metric) {
	s := r.c.last.Load()
	failed := 0.0
	if s == nil || s.summary.Node.CPU == nil || s.summary.Node.Memory == nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(oldScrapeErrorDesc, prometheus.GaugeValue, failed)
	if s == nil {
		return
	}
	n := s.summary.Node
	cpu(ch, nodeCPUDesc, n.CPU)
	mem(ch, nodeMemDesc, n.Memory)
	for _, p := range s.summary.Pods {
		cpu(ch, podCPUDesc, p.CPU, p.PodRef.Name, p.PodRef.Namespace)
		mem(ch, podMemDesc, p.Memory, p.PodRef.Name, p.PodRef.Namespace)
		for _, ctr := range p.Containers {
			cpu(ch, ctrCPUDesc, ctr.CPU, ctr.Name, p.PodRef.Name, p.PodRef.Namespace)
			mem(ch, ctrMemDesc, ctr.Memory, ctr.Name, p.PodRef.Name, p.PodRef.Namespace)
			if !ctr.StartTime.IsZero() {
				ch <- prometheus.MustNewConstMetric(ctrStartDesc, prometheus.GaugeValue,
					float64(ctr.StartTime.UnixNano())/1e9, ctr.Name, p.PodRef.Name, p.PodRef.Namespace)
			}
		}
	}
}

func cpu(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.CPUStats, labels ...string) {
	if s == nil || s.UsageCoreNanoSeconds == nil {
		return
	}
	at(ch, s.Time.Time, prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(*s.UsageCoreNanoSeconds)/1e9, labels...))
}

func mem(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.MemoryStats, labels ...string) {
	if s == nil || s.WorkingSetBytes == nil {
		return
	}
	at(ch, s.Time.Time, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*s.WorkingSetBytes), labels...))
}

// at stamps a sample with the time it was read.
func at(ch chan<- prometheus.Metric, t time.Time, m prometheus.Metric) {
	ch <- prometheus.NewMetricWithTimestamp(t, m)
}
