package crimetrics

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// What critest v1.37.0 asks of the metrics: every descriptor has help and label keys; every series a
// descriptor names is reported for a running pod (the block I/O ones when a device was used) with as many
// label values as the descriptor has keys; no series is reported without a descriptor.
func TestEverySeriesMatchesItsDescriptor(t *testing.T) {
	descs := map[string]*runtimeapi.MetricDescriptor{}
	for _, d := range Descriptors() {
		if d.Help == "" || len(d.LabelKeys) == 0 {
			t.Errorf("%s: help %q keys %v", d.Name, d.Help, d.LabelKeys)
		}
		if descs[d.Name] != nil {
			t.Errorf("%s described twice", d.Name)
		}
		descs[d.Name] = d
	}
	l := Labels{Pod: "web", Namespace: "default", Container: "app", ID: "c1", Image: "busybox"}
	c := ContainerMetrics(Sample{Labels: l, Timestamp: 5e9, StartedAt: 2e9,
		CPU:     CPU{Total: 3e9, User: 2e9, System: 1e9},
		Memory:  Memory{Usage: 100, WorkingSet: 80, PgFault: 7},
		BlockIO: []BlockIO{{Device: "/dev/vda", Major: 254, Minor: 0, ReadBytes: 4096, Reads: 1}},
		FS:      Filesystem{Device: "/var/lib/nodeagent", Usage: 10, Limit: 1000},
	})
	pod := SandboxMetrics(Labels{Pod: "web", Namespace: "default", ID: "s1"}, 5e9,
		[]Network{{Interface: "eth0", RxBytes: 42}}, []*runtimeapi.ContainerMetrics{c})
	seen := map[string]bool{}
	for _, m := range append(append([]*runtimeapi.Metric(nil), pod.Metrics...), c.Metrics...) {
		d := descs[m.Name]
		if d == nil {
			t.Errorf("%s has no descriptor", m.Name)
			continue
		}
		if len(m.LabelValues) != len(d.LabelKeys) || m.Timestamp != 5e9 || m.Value == nil {
			t.Errorf("%s: values %v for keys %v", m.Name, m.LabelValues, d.LabelKeys)
		}
		seen[m.Name] = true
	}
	for name := range descs {
		if !seen[name] {
			t.Errorf("%s described but not reported", name)
		}
	}
	if pod.PodSandboxId != "s1" || c.ContainerId != "c1" || len(pod.ContainerMetrics) != 1 {
		t.Errorf("ids %q %q", pod.PodSandboxId, c.ContainerId)
	}
	value := func(ms []*runtimeapi.Metric, name string, labels ...string) uint64 {
		for _, m := range ms {
			if m.Name == name && (len(labels) == 0 || m.LabelValues[len(m.LabelValues)-len(labels)] == labels[0]) {
				return m.Value.Value
			}
		}
		t.Fatalf("no %s %v", name, labels)
		return 0
	}
	for _, tc := range []struct {
		name string
		ms   []*runtimeapi.Metric
		want uint64
	}{
		{"container_cpu_usage_seconds_total", c.Metrics, 3},
		{"container_cpu_user_seconds_total", c.Metrics, 2},
		{"container_memory_working_set_bytes", c.Metrics, 80},
		{"container_start_time_seconds", c.Metrics, 2},
		{"container_last_seen", c.Metrics, 5},
		{"container_fs_limit_bytes", c.Metrics, 1000},
		{"container_network_receive_bytes_total", pod.Metrics, 42},
	} {
		if got := value(tc.ms, tc.name); got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := value(c.Metrics, "container_memory_failures_total", "pgfault", "container"); got != 7 {
		t.Errorf("pgfault failures %d", got)
	}
	for _, m := range pod.Metrics {
		if m.LabelValues[2] != "" || m.LabelValues[4] != "" || m.LabelValues[5] != "eth0" {
			t.Errorf("pod series %s labels %v: container and image empty, the interface named", m.Name, m.LabelValues)
		}
	}
}
