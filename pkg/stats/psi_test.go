package stats

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/cgroups"
)

// Pressure stall information, where the cgroups give it (cgroup v2), reaches the summary's cpu.psi,
// memory.psi and io.psi of the node, the pods and the containers, and cAdvisor's container_pressure_*
// series in seconds; where they give none (cgroup v1), neither has any.
func TestPressureInSummaryAndCadvisor(t *testing.T) {
	proc := t.TempDir()
	writeFile(t, filepath.Join(proc, "meminfo"), "MemTotal:       1048576 kB\nMemFree: 1 kB\n")
	writeFile(t, filepath.Join(proc, "stat"), "cpu 1 2 3\nbtime 1700000000\n")
	writeFile(t, filepath.Join(proc, "net/dev"), netDevFixture)
	full := &cgroups.PSI{Some: cgroups.PSIData{Total: 2500000, Avg10: 1.5, Avg60: 1, Avg300: 0.5}, Full: cgroups.PSIData{Total: 500000, Avg10: 0.5}}
	cpuOnly := cgroups.Pressure{CPU: full}
	all := cgroups.Pressure{CPU: full, Memory: full, IO: full}
	cg := &fakeCgroups{
		node: cgroups.Stats{CPUUsageNanos: 1, Pressure: all},
		pods: cgroups.Stats{CPUUsageNanos: 1, Pressure: all},
		pod:  map[types.UID]cgroups.Stats{"u1": {CPUUsageNanos: 1, Pressure: all}, "u2": {CPUUsageNanos: 1}},
		ctrs: map[types.UID]map[string]cgroups.Stats{"u1": {"c1": {CPUUsageNanos: 1, Pressure: cpuOnly}}, "u2": {"c2": {CPUUsageNanos: 1}}},
	}
	pods := []Pod{
		{Name: "v2", Namespace: "default", UID: "u1", HostNetwork: true, Containers: []Container{{Name: "app", ID: "c1", Image: "busybox"}}},
		{Name: "v1", Namespace: "default", UID: "u2", HostNetwork: true, Containers: []Container{{Name: "app", ID: "c2", Image: "busybox"}}},
	}
	c := New(Config{NodeName: "n1", Cgroups: cg, Pods: func() []Pod { return pods }, ProcRoot: proc,
		Clock: clocktesting.NewFakeClock(time.Unix(1800000000, 0))})
	c.Collect(context.Background())
	s := c.Summary()
	byName := map[string]statsapi.PodStats{}
	for _, p := range s.Pods {
		byName[p.PodRef.Name] = p
	}
	v2, v1 := byName["v2"], byName["v1"]

	want := statsapi.PSIStats{Some: statsapi.PSIData{Total: 2500000, Avg10: 1.5, Avg60: 1, Avg300: 0.5}, Full: statsapi.PSIData{Total: 500000, Avg10: 0.5}}
	for what, got := range map[string]*statsapi.PSIStats{
		"node cpu": s.Node.CPU.PSI, "node memory": s.Node.Memory.PSI, "node io": ioPSI(s.Node.IO),
		"pods cpu": s.Node.SystemContainers[0].CPU.PSI, "pods io": ioPSI(s.Node.SystemContainers[0].IO),
		"pod cpu": v2.CPU.PSI, "pod memory": v2.Memory.PSI, "pod io": ioPSI(v2.IO),
		"container cpu": v2.Containers[0].CPU.PSI,
	} {
		if got == nil || *got != want {
			t.Errorf("%s psi %+v, want %+v", what, got, want)
		}
	}
	if ctr := v2.Containers[0]; ctr.Memory.PSI != nil || ctr.IO != nil {
		t.Errorf("container without memory and io pressure: memory psi %+v, io %+v", ctr.Memory.PSI, ctr.IO)
	}
	if p := v1; p.CPU.PSI != nil || p.Memory.PSI != nil || p.IO != nil || p.Containers[0].CPU.PSI != nil || p.Containers[0].IO != nil {
		t.Errorf("a pod whose cgroups give no pressure has some: %+v", p)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.CadvisorCollector())
	// The pod v2 (three resources) and its container (cpu), two series each; nothing for v1.
	if n, err := testutil.GatherAndCount(reg, "container_pressure_cpu_waiting_seconds_total", "container_pressure_cpu_stalled_seconds_total",
		"container_pressure_memory_waiting_seconds_total", "container_pressure_memory_stalled_seconds_total",
		"container_pressure_io_waiting_seconds_total", "container_pressure_io_stalled_seconds_total"); err != nil || n != 8 {
		t.Errorf("pressure series: %d, %v; want 8", n, err)
	}
	exposition := `
# HELP container_pressure_cpu_waiting_seconds_total Total time duration tasks in the container have waited due to CPU congestion.
# TYPE container_pressure_cpu_waiting_seconds_total counter
container_pressure_cpu_waiting_seconds_total{container="",image="",name="",namespace="default",pod="v2"} 2.5 1800000000000
container_pressure_cpu_waiting_seconds_total{container="app",image="busybox",name="c1",namespace="default",pod="v2"} 2.5 1800000000000
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exposition), "container_pressure_cpu_waiting_seconds_total"); err != nil {
		t.Error(err)
	}
}

func ioPSI(io *statsapi.IOStats) *statsapi.PSIStats {
	if io == nil {
		return nil
	}
	return io.PSI
}
