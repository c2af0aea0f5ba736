package stats

import (
	"context"
	"os"
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
	"github.com/nodeagent/kubelet/pkg/volume"
)

// fakeCgroups serves fixed readings, which a test changes between gatherings.
type fakeCgroups struct {
	node, pods cgroups.Stats
	pod        map[types.UID]cgroups.Stats
	ctrs       map[types.UID]map[string]cgroups.Stats
	pid        map[types.UID]int
}

func (f *fakeCgroups) NodeStats(context.Context) (cgroups.Stats, error) { return f.node, nil }
func (f *fakeCgroups) PodsStats(context.Context) (cgroups.Stats, error) { return f.pods, nil }
func (f *fakeCgroups) PodStats(_ context.Context, uid types.UID) (cgroups.Stats, error) {
	st, ok := f.pod[uid]
	if !ok {
		return cgroups.Stats{}, cgroups.ErrNotFound
	}
	return st, nil
}
func (f *fakeCgroups) ContainersStats(_ context.Context, uid types.UID, _ []string) (map[string]cgroups.Stats, error) {
	return f.ctrs[uid], nil
}
func (f *fakeCgroups) PodPID(uid types.UID) (int, error) { return f.pid[uid], nil }

const netDevFixture = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  999999     100    0    0    0     0          0         0   999999     100    0    0    0     0       0          0
  eth0:    5000      50    1    0    0     0          0         0     7000      70    2    0    0     0       0          0
`

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCollector(t *testing.T) {
	proc := t.TempDir()
	writeFile(t, filepath.Join(proc, "meminfo"), "MemTotal:       1048576 kB\nMemFree: 1 kB\n")
	writeFile(t, filepath.Join(proc, "stat"), "cpu 1 2 3\nbtime 1700000000\n")
	writeFile(t, filepath.Join(proc, "sys/kernel/pid_max"), "4194304\n")
	writeFile(t, filepath.Join(proc, "net/dev"), netDevFixture)
	writeFile(t, filepath.Join(proc, "4242/net/dev"), netDevFixture)
	if err := os.Symlink("net:[4026532001]", filepath.Join(proc, "4242/ns/net")); err != nil && !os.IsExist(err) {
		if err := os.MkdirAll(filepath.Join(proc, "4242/ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("net:[4026532001]", filepath.Join(proc, "4242/ns/net")); err != nil {
			t.Fatal(err)
		}
	}
	logs := t.TempDir()
	writeFile(t, filepath.Join(volume.PodLogDir(logs, "default", "web", "u1"), "app", "0.log"), strings.Repeat("x", 5000))

	cg := &fakeCgroups{
		node: cgroups.Stats{CPUUsageNanos: 10e9, MemoryUsageBytes: 600 << 20, MemoryWorkingSetBytes: 512 << 20, Processes: 300},
		pods: cgroups.Stats{CPUUsageNanos: 4e9, MemoryWorkingSetBytes: 100 << 20},
		pod:  map[types.UID]cgroups.Stats{"u1": {CPUUsageNanos: 2e9, MemoryWorkingSetBytes: 50 << 20, Processes: 2}},
		ctrs: map[types.UID]map[string]cgroups.Stats{"u1": {"c1": {CPUUsageNanos: 1e9, MemoryWorkingSetBytes: 40 << 20, MemoryRSSBytes: 30 << 20}}},
		pid:  map[types.UID]int{"u1": 4242},
	}
	clk := clocktesting.NewFakeClock(time.Unix(1800000000, 0))
	measured := 0
	var asked, abnormalSeen []string
	pods := []Pod{
		{Name: "web", Namespace: "default", UID: "u1", StartTime: clk.Now(),
			Containers: []Container{{Name: "app", ID: "c1", Image: "busybox", StartTime: clk.Now()}},
			Volumes: map[string]VolumeInfo{"scratch": {Ephemeral: true}, "data": {Claim: "claim-1"}, "db": {Claim: "db-claim"},
				"broken": {Claim: "broken-claim"}}},
		{Name: "another", Namespace: "default", UID: "u2", HostNetwork: true},
	}
	c := New(Config{
		NodeName: "n1", Cgroups: cg, Pods: func() []Pod { return append([]Pod(nil), pods...) },
		Layers: func(_ context.Context, ids []string) (map[string]volume.Usage, error) {
			measured++
			asked = ids
			return map[string]volume.Usage{"c1": {Bytes: 8192, Inodes: 4}}, nil
		},
		Volumes: func(uid types.UID) (map[string]volume.Usage, error) {
			return map[string]volume.Usage{"scratch": {Bytes: 1 << 20, Inodes: 10}, "data": {Bytes: 1 << 30, Inodes: 1}}, nil
		},
		CSIVolumes: func(_ context.Context, uid types.UID) (map[string]volume.VolumeStats, error) {
			if uid != "u1" {
				return nil, nil
			}
			healthy, abnormal := false, true
			return map[string]volume.VolumeStats{
				"db":     {Used: 3 << 20, Capacity: 1 << 30, Available: 1<<30 - 3<<20, Inodes: 1000, InodesUsed: 7, InodesAvailable: 993, Abnormal: &healthy},
				"broken": {Capacity: 1 << 30, Abnormal: &abnormal, Message: "the disk is gone"},
			}, nil
		},
		VolumeAbnormal: func(pod Pod, volume, message string) {
			abnormalSeen = append(abnormalSeen, pod.Name+"/"+volume+": "+message)
		},
		RootDir: t.TempDir(), LogsDir: logs, ProcRoot: proc, Clock: clk,
		PodsMemory: func() int64 { return 900 << 20 },
	})
	ctx := context.Background()
	if c.Summary() != nil {
		t.Fatal("a summary before the first gathering")
	}
	c.Collect(ctx)
	s := c.Summary()
	if s.Node.NodeName != "n1" || s.Node.StartTime.Unix() != 1700000000 {
		t.Errorf("node %q started %v", s.Node.NodeName, s.Node.StartTime)
	}
	if s.Node.CPU.UsageNanoCores != nil {
		t.Error("a CPU rate from a single reading")
	}
	if got := *s.Node.Memory.AvailableBytes; got != (1024-512)<<20 {
		t.Errorf("node memory available %d, want capacity minus working set", got)
	}
	podsSeen := false
	for _, sc := range s.Node.SystemContainers {
		podsSeen = podsSeen || sc.Name == statsapi.SystemContainerPods
		if sc.Name == statsapi.SystemContainerPods && (sc.Memory.AvailableBytes == nil || *sc.Memory.AvailableBytes != 900<<20-*sc.Memory.WorkingSetBytes) {
			t.Errorf("pods container memory %+v: available must be allocatable (900Mi) less the working set", sc.Memory)
		}
	}
	if !podsSeen {
		t.Error("no pods system container")
	}
	if *s.Node.Rlimit.MaxPID != 4194304 || *s.Node.Rlimit.NumOfRunningProcesses != 300 {
		t.Errorf("rlimit %+v", s.Node.Rlimit)
	}
	if n := s.Node.Network; n == nil || n.Name != "eth0" || *n.RxBytes != 5000 || *n.TxErrors != 2 || len(n.Interfaces) != 1 {
		t.Errorf("node network %+v (lo must be left out)", n)
	}
	if len(s.Pods) != 2 || s.Pods[0].PodRef.Name != "another" || s.Pods[1].PodRef.Name != "web" {
		t.Fatalf("pods %+v, want both, by name", s.Pods)
	}
	if s.Pods[0].Network != nil {
		t.Error("a host-network pod got network stats of its own")
	}
	web := s.Pods[1]
	if len(web.Containers) != 1 || web.Containers[0].Name != "app" || *web.Containers[0].Memory.WorkingSetBytes != 40<<20 {
		t.Fatalf("containers %+v", web.Containers)
	}
	app := web.Containers[0]
	if *app.Rootfs.UsedBytes != 8192 || app.Logs == nil || *app.Logs.UsedBytes < 5000 {
		t.Errorf("rootfs %+v logs %+v", app.Rootfs, app.Logs)
	}
	// Ephemeral storage: the writable layer, the logs and the ephemeral volume; not the claim.
	want := 8192 + *app.Logs.UsedBytes + 1<<20
	if got := *web.EphemeralStorage.UsedBytes; got != want {
		t.Errorf("ephemeral storage %d, want %d", got, want)
	}
	for _, v := range web.VolumeStats {
		if v.Name == "data" && (v.PVCRef == nil || v.PVCRef.Name != "claim-1") {
			t.Errorf("claim volume %+v", v)
		}
	}
	var db *statsapi.VolumeStats
	for i := range web.VolumeStats {
		if web.VolumeStats[i].Name == "db" {
			db = &web.VolumeStats[i]
		}
	}
	if db == nil || db.PVCRef == nil || db.PVCRef.Name != "db-claim" || *db.CapacityBytes != 1<<30 || *db.UsedBytes != 3<<20 || *db.InodesFree != 993 {
		t.Errorf("the CSI volume's stats %+v", db)
	}
	if got := *web.EphemeralStorage.UsedBytes; got != want {
		t.Errorf("a CSI volume counted as ephemeral storage: %d, want %d", got, want)
	}
	if err := testutil.CollectAndCompare(c.VolumeCollector(), strings.NewReader(`
# HELP kubelet_volume_stats_used_bytes [ALPHA] Number of used bytes in the volume
# TYPE kubelet_volume_stats_used_bytes gauge
kubelet_volume_stats_used_bytes{namespace="default",persistentvolumeclaim="broken-claim"} 0
kubelet_volume_stats_used_bytes{namespace="default",persistentvolumeclaim="db-claim"} 3.145728e+06
# HELP kubelet_volume_stats_inodes_free [ALPHA] Number of free inodes in the volume
# TYPE kubelet_volume_stats_inodes_free gauge
kubelet_volume_stats_inodes_free{namespace="default",persistentvolumeclaim="broken-claim"} 0
kubelet_volume_stats_inodes_free{namespace="default",persistentvolumeclaim="db-claim"} 993
`), "kubelet_volume_stats_used_bytes", "kubelet_volume_stats_inodes_free"); err != nil {
		t.Error(err)
	}
	// Volume health, where the driver reports it: the metric, and the abnormal volume told once per
	// measurement (the pod's VolumeConditionAbnormal event).
	if err := testutil.CollectAndCompare(c.VolumeCollector(), strings.NewReader(`
# HELP kubelet_volume_stats_health_status_abnormal [ALPHA] Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume is unhealthy, 0 indicates volume is healthy
# TYPE kubelet_volume_stats_health_status_abnormal gauge
kubelet_volume_stats_health_status_abnormal{namespace="default",persistentvolumeclaim="broken-claim"} 1
kubelet_volume_stats_health_status_abnormal{namespace="default",persistentvolumeclaim="db-claim"} 0
`), "kubelet_volume_stats_health_status_abnormal"); err != nil {
		t.Error(err)
	}
	if strings.Join(abnormalSeen, ",") != "web/broken: the disk is gone" {
		t.Errorf("abnormal volumes told %q", abnormalSeen)
	}
	if web.Network == nil || *web.Network.RxBytes != 5000 {
		t.Errorf("pod network %+v", web.Network)
	}

	// Ten seconds and one CPU-second later: half a core. Directories are not measured again before a minute.
	clk.Step(10 * time.Second)
	cg.node.CPUUsageNanos += 5e9
	st := cg.ctrs["u1"]["c1"]
	st.CPUUsageNanos += 1e9
	cg.ctrs["u1"]["c1"] = st
	c.Collect(ctx)
	s = c.Summary()
	if got := *s.Node.CPU.UsageNanoCores; got != 5e8 {
		t.Errorf("node nanocores %d, want 5e8", got)
	}
	if got := *s.Pods[1].Containers[0].CPU.UsageNanoCores; got != 1e8 {
		t.Errorf("container nanocores %d, want 1e8", got)
	}
	if measured != 1 {
		t.Errorf("layers measured %d times, want once", measured)
	}
	if *s.Pods[1].Containers[0].Rootfs.UsedBytes != 8192 {
		t.Error("the last measurement of the layer was not kept")
	}

	// The resource metrics upstream's kubelet serves.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.ResourceCollector())
	if n, err := testutil.GatherAndCount(reg, "node_cpu_usage_seconds_total", "node_memory_working_set_bytes",
		"resource_scrape_error", "scrape_error"); err != nil || n != 4 {
		t.Errorf("resource metrics: %d series, %v", n, err)
	}
	cadvisor := prometheus.NewPedanticRegistry()
	cadvisor.MustRegister(c.CadvisorCollector())
	if n, err := testutil.GatherAndCount(cadvisor, "machine_memory_bytes", "container_cpu_usage_seconds_total"); err != nil || n != 3 {
		t.Errorf("cadvisor metrics: %d series, %v", n, err)
	}

	// A new container's layer is measured at once, alone; a gone one's CPU samples are dropped.
	pods = []Pod{{Name: "new", Namespace: "default", UID: "u3", Containers: []Container{{Name: "x", ID: "c3"}}}}
	clk.Step(10 * time.Second)
	c.Collect(ctx)
	if measured != 2 || len(asked) != 1 || asked[0] != "c3" {
		t.Errorf("layers measured %d times, last for %v; want again for the new container alone", measured, asked)
	}
	// A minute after the last measure, every layer again.
	clk.Step(time.Minute)
	c.Collect(ctx)
	if measured != 3 || asked != nil {
		t.Errorf("layers measured %d times, last for %v; want all of them", measured, asked)
	}
	if _, ok := c.prev["ctr/c1"]; ok {
		t.Error("the CPU sample of a gone container was kept")
	}

}

func TestReadNetDev(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev")
	writeFile(t, path, netDevFixture+"garbage line\n  short: 1 2\n")
	ifs, err := readNetDev(path)
	if err != nil || len(ifs) != 1 || ifs[0].name != "eth0" || ifs[0].txBytes != 7000 || ifs[0].rxErrors != 1 {
		t.Errorf("readNetDev = %+v, %v", ifs, err)
	}
	if _, err := readNetDev(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file read without error")
	}
}

// A gathering soon after another (an eviction's) keeps the last CPU rate instead of one over milliseconds,
// and the rate after it spans the whole time since the last reading it was taken from.
func TestRateOverShortWindows(t *testing.T) {
	c := New(Config{ProcRoot: t.TempDir()})
	t0 := time.Unix(1000, 0)
	if r := c.rate("k", t0, 0); r != nil {
		t.Fatalf("a rate from one reading: %d", *r)
	}
	if r := c.rate("k", t0.Add(10*time.Second), 10e9); r == nil || *r != 1e9 {
		t.Fatalf("rate over 10 s: %v, want one core", r)
	}
	if r := c.rate("k", t0.Add(10*time.Second+50*time.Millisecond), 10e9+150e6); r == nil || *r != 1e9 {
		t.Errorf("rate 50 ms later: %v, want the last one (one core), not three", r)
	}
	if r := c.rate("k", t0.Add(20*time.Second), 20e9); r == nil || *r != 1e9 {
		t.Errorf("rate at the next gathering: %v, want one core over the 10 s since the last base", r)
	}
}
