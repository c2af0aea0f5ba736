package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const subsystem = "kubelet"

// Upstream's buckets: Prometheus' defaults for most durations; pod starts reach an hour.
var (
	podStartBuckets  = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	imagePullBuckets = []float64{0.5, 1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
)

// The kubelet's metrics. Their help strings carry upstream's stability level.
var (
	PLEGRelistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: subsystem, Name: "pleg_relist_duration_seconds",
		Help: "[ALPHA] Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets})
	PLEGRelistInterval = prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: subsystem, Name: "pleg_relist_interval_seconds",
		Help: "[ALPHA] Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets})
	PLEGLastSeen = prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem, Name: "pleg_last_seen_seconds",
		Help: "[ALPHA] Timestamp in seconds when PLEG was last seen active."})
	PodStartDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: subsystem, Name: "pod_start_duration_seconds",
		Help: "[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run", Buckets: podStartBuckets})
	PodStartSLIDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: subsystem, Name: "pod_start_sli_duration_seconds",
		Help:    "[BETA] Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
		Buckets: podStartBuckets})
	PodWorkerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "pod_worker_duration_seconds",
		Help: "[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync", Buckets: prometheus.DefBuckets},
		[]string{"operation_type"})
	CgroupVersion = prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem, Name: "cgroup_version",
		Help: "[ALPHA] cgroup version on the hosts."})
	RunningPods = prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem, Name: "running_pods",
		Help: "[ALPHA] Number of pods that have a running pod sandbox"})
	RunningContainers = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "running_containers",
		Help: "[ALPHA] Number of containers currently running"}, []string{"container_state"})
	RuntimeOperations = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "runtime_operations_total",
		Help: "[ALPHA] Cumulative number of runtime operations by operation type."}, []string{"operation_type"})
	RuntimeOperationsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "runtime_operations_duration_seconds",
		Help: "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.", Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14)},
		[]string{"operation_type"})
	RuntimeOperationsErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "runtime_operations_errors_total",
		Help: "[ALPHA] Cumulative number of runtime operation errors by operation type."}, []string{"operation_type"})
	StartedContainers = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "started_containers_total",
		Help: "[ALPHA] Cumulative number of containers started"}, []string{"container_type"})
	StartedContainersErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "started_containers_errors_total",
		Help: "[ALPHA] Cumulative number of errors when starting containers"}, []string{"container_type", "code"})
	StartedPods = prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem, Name: "started_pods_total",
		Help: "[ALPHA] Cumulative number of pods started"})
	StartedPodsErrors = prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem, Name: "started_pods_errors_total",
		Help: "[ALPHA] Cumulative number of errors when starting pods"})
	Evictions = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "evictions",
		Help: "[ALPHA] Cumulative number of pod evictions by eviction signal"}, []string{"eviction_signal"})
	ImagePullDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "image_pull_duration_seconds",
		Help: "[ALPHA] Duration in seconds to pull an image.", Buckets: imagePullBuckets}, []string{"image_size_in_bytes"})
	// StatsGatheringDuration is the node agent's own: how long each gathering of the node's and pods' usage
	// took (the stats behind /stats/summary and /metrics/resource).
	StatsGatheringDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "nodeagent", Name: "stats_gathering_duration_seconds",
		Help:    "How long each gathering of the node's and pods' usage took, in seconds.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}})
	// StatsGatheringCPU is the CPU time the gatherings took, in seconds.
	StatsGatheringCPU = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nodeagent", Name: "stats_gathering_cpu_seconds_total",
		Help: "CPU time spent gathering the node's and pods' usage, in seconds."})
	nodeName = prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "node_name",
		Help: "[ALPHA] The node's name. The count is always 1."}, []string{"node"})
)

var registerOnce sync.Once

// Registry returns the registry /metrics serves: the kubelet's metrics with node's name set, the API clients'
// rest_client_* metrics, and the Go runtime's and the process's collectors. Call it once per process.
func Registry(node string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(PLEGRelistDuration, PLEGRelistInterval, PLEGLastSeen, PodStartDuration, PodStartSLIDuration,
		PodWorkerDuration, CgroupVersion, RunningPods, RunningContainers, RuntimeOperations, RuntimeOperationsDuration,
		RuntimeOperationsErrors, StartedContainers, StartedContainersErrors, StartedPods, StartedPodsErrors, Evictions,
		ImagePullDuration, StatsGatheringDuration, StatsGatheringCPU, nodeName, restRequests, restLatency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	nodeName.WithLabelValues(node).Set(1)
	registerOnce.Do(registerRESTClientMetrics)
	return reg
}

// Since is the time since start in seconds, for observations.
func Since(start time.Time) float64 { return time.Since(start).Seconds() }

// ImageSizeBucket is the image_size_in_bytes label of an image of size bytes, upstream's categories.
func ImageSizeBucket(size uint64) string {
	for _, b := range []struct {
		limit uint64
		label string
	}{{10 << 20, "0-10MB"}, {100 << 20, "10MB-100MB"}, {500 << 20, "100MB-500MB"}, {1 << 30, "500MB-1GB"}, {5 << 30, "1GB-5GB"}, {10 << 30, "5GB-10GB"}} {
		if size < b.limit {
			return b.label
		}
	}
	return "10GB+"
}
