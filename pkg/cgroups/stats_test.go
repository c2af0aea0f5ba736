package cgroups

import (
	"errors"
	"reflect"
	"testing"
)

func TestPodStats(t *testing.T) {
	for _, hc := range hostCases {
		t.Run(hc.name, func(t *testing.T) {
			h := newFakeHost(t, hc.mode)
			m := h.start(hc.driver)
			ctx := testContext(t)
			if _, err := m.EnsurePod(ctx, burstablePod("s1")); err != nil {
				t.Fatal(err)
			}
			dir := rel(hc.driver, "kubepods", "burstable", "pods1")
			// What the kernel would show for a pod using 100 MiB, 40 MiB of
			// it inactive page cache, 50 MiB anonymous, 3 tasks, 5 s of CPU.
			if hc.mode.unified() {
				h.write("", dir, "cpu.stat", "usage_usec 5000000\nuser_usec 4000000\nsystem_usec 1000000\nnr_periods 10\n")
				h.write("", dir, "memory.current", "104857600\n")
				h.write("", dir, "memory.stat", v2MemoryStat(50<<20, 50<<20, 40<<20))
				h.write("", dir, "pids.current", "3\n")
			} else {
				h.write("cpuacct", dir, "cpuacct.usage", "5000000000\n")
				h.write("memory", dir, "memory.usage_in_bytes", "104857600\n")
				h.write("memory", dir, "memory.stat", v1MemoryStat(50<<20, 50<<20, 40<<20))
				h.write("pids", dir, "pids.current", "3\n")
			}
			got, err := m.PodStats(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			want := Stats{CPUUsageNanos: 5e9, MemoryUsageBytes: 100 << 20, MemoryWorkingSetBytes: 60 << 20,
				MemoryRSSBytes: 50 << 20, Processes: 3, PageFaults: 1000, MajorPageFaults: 1}
			if hc.mode.unified() {
				want.PageFaults, want.MajorPageFaults = 10, 0
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("PodStats = %+v, want %+v", got, want)
			}
			if _, err := m.PodStats(ctx, "nope"); !errors.Is(err, ErrNotFound) {
				t.Errorf("PodStats of unknown pod = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestNodeStats(t *testing.T) {
	tests := []struct {
		mode Mode
		want Stats
	}{
		// v1: the root cgroup's files (see v1RootFiles).
		{ModeV1, Stats{CPUUsageNanos: 987654321000, MemoryUsageBytes: 8 << 30, MemoryWorkingSetBytes: 6 << 30,
			MemoryRSSBytes: 1 << 30, Processes: 345, PageFaults: 1000, MajorPageFaults: 1}},
		// v2: cpu.stat of the root; memory from meminfo (24 GiB total, 20
		// GiB free, 1 GiB inactive file, 512 MiB anonymous).
		{ModeV2, Stats{CPUUsageNanos: 987654321000, MemoryUsageBytes: 4 << 30, MemoryWorkingSetBytes: 3 << 30,
			MemoryRSSBytes: 512 << 20, Processes: 345}},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			h := newFakeHost(t, tt.mode)
			m := h.start(DriverCgroupfs)
			got, err := m.NodeStats(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("NodeStats = %+v, want %+v", got, tt.want)
			}
			if ws, err := m.NodeMemoryWorkingSet(); err != nil || ws != tt.want.MemoryWorkingSetBytes {
				t.Errorf("NodeMemoryWorkingSet = %d, %v; want NodeStats' %d", ws, err, tt.want.MemoryWorkingSetBytes)
			}
		})
	}
}

func TestContainersStatsAndPodPID(t *testing.T) {
	for _, hc := range hostCases {
		t.Run(hc.name, func(t *testing.T) {
			h := newFakeHost(t, hc.mode)
			m := h.start(hc.driver)
			ctx := testContext(t)
			if _, err := m.EnsurePod(ctx, burstablePod("s1")); err != nil {
				t.Fatal(err)
			}
			pod := rel(hc.driver, "kubepods", "burstable", "pods1")
			child := "c0ffee"
			if hc.driver == DriverSystemd {
				child = "cri-containerd-c0ffee.scope"
			}
			ctr := pod + "/" + child
			if hc.mode.unified() {
				h.write("", ctr, "cpu.stat", "usage_usec 2000000\n")
				h.write("", ctr, "memory.current", "10485760\n")
				h.write("", ctr, "memory.stat", v2MemoryStat(8<<20, 2<<20, 1<<20))
				h.write("", ctr, "pids.current", "1\n")
				h.write("", ctr, "cgroup.procs", "4242\n4243\n")
			} else {
				h.write("cpuacct", ctr, "cpuacct.usage", "2000000000\n")
				h.write("memory", ctr, "memory.usage_in_bytes", "10485760\n")
				h.write("memory", ctr, "memory.stat", v1MemoryStat(2<<20, 8<<20, 1<<20))
				h.write("pids", ctr, "pids.current", "1\n")
				h.write("pids", ctr, "cgroup.procs", "4242\n4243\n")
			}
			got, err := m.ContainersStats(ctx, "s1", nil)
			if err != nil {
				t.Fatal(err)
			}
			st, ok := got["c0ffee"]
			if len(got) != 1 || !ok || st.CPUUsageNanos != 2e9 || st.MemoryWorkingSetBytes != 9<<20 || st.Processes != 1 {
				t.Errorf("ContainersStats = %+v, want c0ffee with 2 s of CPU, 9 MiB working set, 1 task", got)
			}
			if pid, err := m.PodPID("s1"); err != nil || pid != 4242 {
				t.Errorf("PodPID = %d, %v; want 4242", pid, err)
			}
			if only, err := m.ContainersStats(ctx, "s1", []string{"other"}); err != nil || len(only) != 0 {
				t.Errorf("ContainersStats of another container = %+v, %v; want none", only, err)
			}
			if _, err := m.ContainersStats(ctx, "nope", nil); !errors.Is(err, ErrNotFound) {
				t.Errorf("ContainersStats of unknown pod = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestWorkingSet(t *testing.T) {
	for _, tt := range []struct{ usage, inactive, want uint64 }{
		{100, 40, 60}, {100, 100, 0}, {100, 200, 0}, {0, 0, 0},
	} {
		if got := workingSet(tt.usage, tt.inactive); got != tt.want {
			t.Errorf("workingSet(%d, %d) = %d, want %d", tt.usage, tt.inactive, got, tt.want)
		}
	}
}
