package resourcemetrics

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/nodeagent/kubelet/internal/httpjson"
)

// Group is the API group served, with its version.
const (
	Group   = "metrics.k8s.io"
	Version = "v1beta1"
)

// Discovery is the group's resource list, as metrics-server publishes it.
func Discovery() *metav1.APIResourceList {
	return &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: Group + "/" + Version, APIResources: []metav1.APIResource{
			{Name: "nodes", Kind: "NodeMetrics", Verbs: []string{"get", "list"}},
			{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: []string{"get", "list"}},
		}}
}

// Request is a metrics.k8s.io request: the resource (nodes or pods), the namespace and name (empty for a
// list), and the list's label selector.
type Request struct {
	Resource, Namespace, Name, LabelSelector string
}

// Serve answers r with the metrics scraped so far, or the error an API client expects.
func (s *Scraper) Serve(w http.ResponseWriter, req Request) {
	sel := labels.Everything()
	if req.LabelSelector != "" {
		var err error
		if sel, err = labels.Parse(req.LabelSelector); err != nil {
			writeError(w, apierrors.NewBadRequest("invalid labelSelector: "+err.Error()))
			return
		}
	}
	gr := schema.GroupResource{Group: Group, Resource: req.Resource}
	switch req.Resource {
	case "nodes":
		items := s.nodeMetrics(req.Name, sel)
		if req.Name != "" {
			if len(items) == 0 {
				writeError(w, apierrors.NewNotFound(gr, req.Name))
				return
			}
			write(w, &items[0])
			return
		}
		write(w, &metricsv1beta1.NodeMetricsList{TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: Group + "/" + Version},
			Items: items})
	case "pods":
		items := s.podMetrics(req.Namespace, req.Name, sel)
		if req.Name != "" {
			if len(items) == 0 {
				writeError(w, apierrors.NewNotFound(gr, req.Name))
				return
			}
			write(w, &items[0])
			return
		}
		write(w, &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: Group + "/" + Version},
			Items: items})
	default:
		writeError(w, apierrors.NewNotFound(gr, req.Name))
	}
}

func (s *Scraper) nodeMetrics(name string, sel labels.Selector) []metricsv1beta1.NodeMetrics {
	nodes := s.cfg.Nodes()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []metricsv1beta1.NodeMetrics
	for _, n := range nodes {
		if name != "" && n.Name != name || !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		d := s.nodes[n.Name]
		if d == nil {
			continue
		}
		cpu, mem, window, ok := d.node.usage()
		if !ok {
			continue
		}
		out = append(out, metricsv1beta1.NodeMetrics{TypeMeta: metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: Group + "/" + Version},
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, CreationTimestamp: metav1.NewTime(time.Now())},
			Timestamp:  metav1.NewTime(d.node.cur.at), Window: metav1.Duration{Duration: window}, Usage: usage(cpu, mem)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Scraper) podMetrics(namespace, name string, sel labels.Selector) []metricsv1beta1.PodMetrics {
	pods := s.cfg.Pods(namespace)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []metricsv1beta1.PodMetrics
	for _, p := range pods {
		if name != "" && p.Name != name || !sel.Matches(labels.Set(p.Labels)) || p.Spec.NodeName == "" {
			continue
		}
		d := s.nodes[p.Spec.NodeName]
		if d == nil {
			continue
		}
		k := podKey{p.Namespace, p.Name}
		ps := d.pods[k]
		if ps == nil {
			continue
		}
		if _, _, window, ok := ps.usage(); ok {
			pm := metricsv1beta1.PodMetrics{TypeMeta: metav1.TypeMeta{Kind: "PodMetrics", APIVersion: Group + "/" + Version},
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, CreationTimestamp: metav1.NewTime(time.Now())},
				Timestamp:  metav1.NewTime(ps.cur.at), Window: metav1.Duration{Duration: window}, Containers: []metricsv1beta1.ContainerMetrics{}}
			names := make([]string, 0, len(d.containers[k]))
			for c := range d.containers[k] {
				names = append(names, c)
			}
			sort.Strings(names)
			for _, c := range names {
				if cpu, mem, _, ok := d.containers[k][c].usage(); ok {
					pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: c, Usage: usage(cpu, mem)})
				}
			}
			out = append(out, pm)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace < out[j].Namespace || out[i].Namespace == out[j].Namespace && out[i].Name < out[j].Name
	})
	return out
}

// usage is a ResourceList of CPU in nanocores and memory in bytes, as metrics-server reports them.
func usage(cores, bytes float64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewScaledQuantity(int64(cores*1e9), resource.Nano),
		corev1.ResourceMemory: *resource.NewQuantity(int64(bytes), resource.BinarySI),
	}
}

func write(w http.ResponseWriter, v any) { httpjson.Write(w, v) }

func writeError(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	b, _ := json.Marshal(&st)
	_, _ = w.Write(b)
}
