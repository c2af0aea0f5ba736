package runtime

import (
	"strings"
	"testing"

	v1stats "github.com/containerd/cgroups/v3/cgroup1/stats"
	v2stats "github.com/containerd/cgroups/v3/cgroup2/stats"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nodeagent/kubelet/pkg/runtime/crimetrics"
)

func TestParseNetDev(t *testing.T) {
	const dev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0
  eth0:  123456     789    1    2    0     0          0         0    65432     321    3    4    0     0       0          0
`
	n, err := parseNetDev(strings.NewReader(dev), "eth0")
	want := crimetrics.Network{Interface: "eth0", RxBytes: 123456, RxPackets: 789, RxErrors: 1, RxDropped: 2,
		TxBytes: 65432, TxPackets: 321, TxErrors: 3, TxDropped: 4}
	if err != nil || n != want {
		t.Errorf("eth0: %+v %v", n, err)
	}
	if _, err := parseNetDev(strings.NewReader(dev), "eth1"); err == nil {
		t.Error("a missing interface is an error")
	}
	if _, err := parseNetDev(strings.NewReader("  eth0: 1 2 x\n"), "eth0"); err == nil {
		t.Error("a short line is an error")
	}
	if _, err := parseNetDev(strings.NewReader("  eth0: 1 2 3 4 5 6 7 8 9 10 11 twelve\n"), "eth0"); err == nil {
		t.Error("a field that is not a number is an error")
	}
}

// The cgroup's statistics become the series' values alike on v1 and v2: nanoseconds of CPU, the working
// set without inactive file pages, the block I/O per device.
func TestCgroupSamples(t *testing.T) {
	var v1 crimetrics.Sample
	cgroupV1Sample(&v1, &v1stats.Metrics{
		CPU:              &v1stats.CPUStat{Usage: &v1stats.CPUUsage{Total: 3e9, User: 2e9, Kernel: 1e9}, Throttling: &v1stats.Throttle{Periods: 5, ThrottledPeriods: 1, ThrottledTime: 2e9}},
		Memory:           &v1stats.MemoryStat{TotalRSS: 10, TotalCache: 20, TotalInactiveFile: 30, Usage: &v1stats.MemoryEntry{Usage: 100, Max: 150, Failcnt: 2}},
		MemoryOomControl: &v1stats.MemoryOomControl{OomKill: 1},
		Pids:             &v1stats.PidsStat{Limit: 4096},
		Blkio: &v1stats.BlkIOStat{
			IoServiceBytesRecursive: []*v1stats.BlkIOEntry{{Op: "Read", Major: 254, Minor: 0, Value: 4096}, {Op: "Write", Major: 254, Minor: 0, Value: 8192}},
			IoServicedRecursive:     []*v1stats.BlkIOEntry{{Op: "Read", Major: 254, Minor: 0, Value: 1}, {Op: "Write", Major: 254, Minor: 0, Value: 2}}},
	})
	if v1.CPU.Total != 3e9 || v1.CPU.System != 1e9 || v1.CPU.ThrottledNanos != 2e9 || v1.Memory.WorkingSet != 70 ||
		v1.Memory.MaxUsage != 150 || v1.Memory.OOMEvents != 1 || v1.Processes.ThreadsMax != 4096 {
		t.Errorf("v1: %+v", v1)
	}
	if len(v1.BlockIO) != 1 || v1.BlockIO[0].ReadBytes != 4096 || v1.BlockIO[0].Writes != 2 {
		t.Errorf("v1 block I/O %+v", v1.BlockIO)
	}
	var v2 crimetrics.Sample
	cgroupV2Sample(&v2, &v2stats.Metrics{
		CPU:          &v2stats.CPUStat{UsageUsec: 3e6, UserUsec: 2e6, SystemUsec: 1e6},
		Memory:       &v2stats.MemoryStat{Usage: 100, InactiveFile: 120, Anon: 10},
		MemoryEvents: &v2stats.MemoryEvents{OomKill: 3},
		Io:           &v2stats.IOStat{Usage: []*v2stats.IOEntry{{Major: 8, Minor: 0, Rbytes: 1, Wbytes: 2, Rios: 3, Wios: 4}}},
	})
	if v2.CPU.Total != 3e9 || v2.CPU.User != 2e9 || v2.Memory.WorkingSet != 0 || v2.Memory.OOMEvents != 3 ||
		len(v2.BlockIO) != 1 || v2.BlockIO[0].Writes != 4 {
		t.Errorf("v2: %+v", v2)
	}
}

func TestSpecValues(t *testing.T) {
	period, shares, limit := uint64(100000), uint64(512), int64(64<<20)
	got := specValues(&runtimespec.Spec{Linux: &runtimespec.Linux{Resources: &runtimespec.LinuxResources{
		CPU: &runtimespec.LinuxCPU{Period: &period, Shares: &shares}, Memory: &runtimespec.LinuxMemory{Limit: &limit}}}})
	if got != (crimetrics.Spec{CPUPeriod: period, CPUShares: shares, MemoryLimit: uint64(limit)}) {
		t.Errorf("%+v", got)
	}
	if got := specValues(&runtimespec.Spec{}); got != (crimetrics.Spec{}) {
		t.Errorf("no resources: %+v", got)
	}
}
