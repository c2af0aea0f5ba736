package prober

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// durationBuckets are Prometheus' default histogram buckets, which upstream's prober_probe_duration_seconds
// uses, in seconds.
var durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// durationKey labels prober_probe_duration_seconds: no result and no pod UID, as upstream's.
type durationKey struct {
	Type                      Type
	Container, Pod, Namespace string
}

// lateBuckets bound prober_probe_start_lateness_seconds: a probe starts within a millisecond of its tick on
// an idle node.
var lateBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// histogram counts observations per bucket (cumulative when written), with their sum.
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

// WriteMetrics writes prober_probe_total and prober_probe_duration_seconds in Prometheus' text format, as
// upstream's kubelet serves them on /metrics/probes.
func (m *Manager) WriteMetrics(w io.Writer) error {
	m.mu.Lock()
	counts := make([]Count, 0, len(m.counts))
	for c := range m.counts {
		counts = append(counts, c)
	}
	values := make(map[Count]uint64, len(m.counts))
	for c, v := range m.counts {
		values[c] = v
	}
	hists := make(map[durationKey]histogram, len(m.durations))
	for k, h := range m.durations {
		hists[k] = h.copy()
	}
	late := m.lateness.copy()
	m.mu.Unlock()

	var b strings.Builder
	b.WriteString("# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.\n")
	b.WriteString("# TYPE prober_probe_total counter\n")
	sort.Slice(counts, func(i, j int) bool { return fmt.Sprint(counts[i]) < fmt.Sprint(counts[j]) })
	for _, c := range counts {
		fmt.Fprintf(&b, "prober_probe_total{container=%s,namespace=%s,pod=%s,pod_uid=%s,probe_type=%s,result=%s} %d\n",
			quote(c.Container), quote(c.Namespace), quote(c.Pod), quote(string(c.PodUID)), quote(string(c.Type)), quote(c.Result), values[c])
	}
	b.WriteString("# HELP prober_probe_duration_seconds [ALPHA] Duration in seconds for a probe response.\n")
	b.WriteString("# TYPE prober_probe_duration_seconds histogram\n")
	keys := make([]durationKey, 0, len(hists))
	for k := range hists {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
	for _, k := range keys {
		h := hists[k]
		labels := fmt.Sprintf("container=%s,namespace=%s,pod=%s,probe_type=%s", quote(k.Container), quote(k.Namespace), quote(k.Pod), quote(string(k.Type)))
		h.write(&b, "prober_probe_duration_seconds", labels+",")
	}
	b.WriteString("# HELP prober_probe_start_lateness_seconds How long after its period's tick each probe of the node started.\n")
	b.WriteString("# TYPE prober_probe_start_lateness_seconds histogram\n")
	late.write(&b, "prober_probe_start_lateness_seconds", "")
	_, err := io.WriteString(w, b.String())
	return err
}

func (h *histogram) copy() histogram {
	return histogram{bounds: h.bounds, buckets: append([]uint64(nil), h.buckets...), count: h.count, sum: h.sum}
}

// write writes the histogram's series; labels, when not empty, ends with a comma.
func (h histogram) write(b *strings.Builder, name, labels string) {
	var cum uint64
	for i, le := range h.bounds {
		if i < len(h.buckets) {
			cum += h.buckets[i]
		}
		fmt.Fprintf(b, "%s_bucket{%sle=%q} %d\n", name, labels, strconv.FormatFloat(le, 'f', -1, 64), cum)
	}
	fmt.Fprintf(b, "%s_bucket{%sle=\"+Inf\"} %d\n", name, labels, h.count)
	labels = strings.TrimSuffix(labels, ",")
	if labels != "" {
		labels = "{" + labels + "}"
	}
	fmt.Fprintf(b, "%s_sum%s %s\n", name, labels, strconv.FormatFloat(h.sum, 'g', -1, 64))
	fmt.Fprintf(b, "%s_count%s %d\n", name, labels, h.count)
}

// quote is a label value in Prometheus' text format: backslash, double quote and newline escaped.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
