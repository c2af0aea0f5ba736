package server

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/kubelet/internal/httpjson"
)

// StatusSources are what the status endpoints serve. Each is optional: a path without its source answers 404.
type StatusSources struct {
	// Metrics are the Prometheus registries served by path: /metrics, /metrics/resource, /metrics/cadvisor,
	// /metrics/probes.
	Metrics map[string]prometheus.Gatherer
	// Summary returns the last stats gathering (/stats/summary); nil before the first.
	Summary func() *statsapi.Summary
	// Pods returns the pods the kubelet has admitted (/pods).
	Pods func() []*v1.Pod
	// RunningPods returns the pods found in the runtime (/runningpods/).
	RunningPods func(ctx context.Context) ([]*v1.Pod, error)
	// Configz returns the effective configuration, served as {"kubeletconfig": ...} (/configz).
	Configz func() any
	// NodeLogsDir is the node's log directory served under /logs/ (upstream's /var/log).
	NodeLogsDir string
	// DebugPods serves /debug/pods, the node's debug page (nodes/proxy, as every path without its own).
	DebugPods http.Handler
}

func (s *Server) statusRoutes() {
	src := s.cfg.Status
	for path, g := range src.Metrics {
		s.mux.Handle("GET "+path, promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
			ErrorLog: promLogger{}}))
	}
	if src.Summary != nil {
		s.mux.HandleFunc("GET /stats/summary", s.serveSummary)
	}
	if src.Pods != nil {
		s.mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) { writePodList(w, src.Pods()) })
	}
	if src.RunningPods != nil {
		running := func(w http.ResponseWriter, r *http.Request) {
			pods, err := src.RunningPods(r.Context())
			if err != nil {
				http.Error(w, "list running pods: "+err.Error(), http.StatusInternalServerError)
				return
			}
			writePodList(w, pods)
		}
		// Upstream's path ends with a slash; clients that clean paths ask without it.
		s.mux.HandleFunc("GET /runningpods/{$}", running)
		s.mux.HandleFunc("GET /runningpods", running)
	}
	if src.Configz != nil {
		s.mux.HandleFunc("GET /configz", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, map[string]any{"kubeletconfig": src.Configz()})
		})
	}
	if src.NodeLogsDir != "" {
		s.mux.HandleFunc("GET /logs/", s.serveNodeLogs)
	}
	if src.DebugPods != nil {
		s.mux.Handle("GET /debug/pods", src.DebugPods)
	}
}

// serveSummary answers the last gathering; ?only_cpu_and_memory=true keeps what metrics-server used to read
// (the node's and each pod's and container's CPU and memory), as upstream.
func (s *Server) serveSummary(w http.ResponseWriter, r *http.Request) {
	sum := s.cfg.Status.Summary()
	if sum == nil {
		http.Error(w, "no stats gathered yet", http.StatusServiceUnavailable)
		return
	}
	switch v := r.URL.Query().Get("only_cpu_and_memory"); v {
	case "", "false":
	case "true":
		sum = cpuAndMemory(sum)
	default:
		http.Error(w, "invalid only_cpu_and_memory \""+v+"\": true or false", http.StatusBadRequest)
		return
	}
	writeJSON(w, sum)
}

// cpuAndMemory is the summary without network, filesystems, volumes and processes.
func cpuAndMemory(sum *statsapi.Summary) *statsapi.Summary {
	out := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: sum.Node.NodeName, StartTime: sum.Node.StartTime,
		CPU: sum.Node.CPU, Memory: sum.Node.Memory, SystemContainers: sum.Node.SystemContainers}}
	for _, p := range sum.Pods {
		ps := statsapi.PodStats{PodRef: p.PodRef, StartTime: p.StartTime, CPU: p.CPU, Memory: p.Memory}
		for _, c := range p.Containers {
			ps.Containers = append(ps.Containers, statsapi.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory})
		}
		out.Pods = append(out.Pods, ps)
	}
	return out
}

func writePodList(w http.ResponseWriter, pods []*v1.Pod) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: make([]v1.Pod, 0, len(pods))}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, &list)
}

func writeJSON(w http.ResponseWriter, v any) { httpjson.Write(w, v) }

// promLogger logs what the Prometheus handler could not gather.
type promLogger struct{}

func (promLogger) Println(v ...any) { klog.Background().Info("Serving metrics", "err", v) }
