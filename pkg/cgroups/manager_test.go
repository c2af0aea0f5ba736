package cgroups

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// hostCases are the layouts and drivers every tree test runs on.
var hostCases = []struct {
	name   string
	mode   Mode
	driver Driver
}{
	{"v1 cgroupfs", ModeV1, DriverCgroupfs},
	{"hybrid cgroupfs", ModeHybrid, DriverCgroupfs},
	{"v2 cgroupfs", ModeV2, DriverCgroupfs},
	{"v1 systemd", ModeV1, DriverSystemd},
	{"v2 systemd", ModeV2, DriverSystemd},
}

// rel is where a cgroup lives under a hierarchy root for the driver.
func rel(driver Driver, parts ...string) string {
	if driver == DriverSystemd {
		return cgroupName(parts).systemd()
	}
	return cgroupName(parts).cgroupfs()
}

// Node: 2 CPUs, 24 GiB; kube-reserved 100m/512Mi; eviction 100Mi.
// Allocatable: 1900m -> 1945 shares (weight 75); 23964Mi = 25128075264.
func TestStartBuildsQOSTree(t *testing.T) {
	for _, hc := range hostCases {
		t.Run(hc.name, func(t *testing.T) {
			h := newFakeHost(t, hc.mode)
			m := h.start(hc.driver)
			if m.Mode() != hc.mode || m.Driver() != hc.driver {
				t.Fatalf("mode %s driver %s, want %s %s", m.Mode(), m.Driver(), hc.mode, hc.driver)
			}
			pods := rel(hc.driver, "kubepods")
			burstable := rel(hc.driver, "kubepods", "burstable")
			bestEffort := rel(hc.driver, "kubepods", "besteffort")
			if hc.mode.unified() {
				for _, want := range [][3]string{
					{pods, "cpu.weight", "75"}, {pods, "memory.max", "25128075264"}, {pods, "pids.max", "4194304"},
					{burstable, "cpu.weight", "1"}, {bestEffort, "cpu.weight", "1"},
					{burstable, "hugetlb.2MB.max", "4611686018427387904"},
					{bestEffort, "hugetlb.1GB.max", "4611686018427387904"},
				} {
					assertFile(t, h, "", want[0], want[1], want[2])
				}
				for _, c := range []string{"+cpu", "+memory", "+pids", "+hugetlb"} {
					if got := h.read("", "/", "cgroup.subtree_control"); !strings.Contains(got, c) {
						t.Errorf("root cgroup.subtree_control = %q, want %s", got, c)
					}
				}
				assertNoFile(t, h, "", pods, "cgroup.clone_children")
				return
			}
			for _, want := range [][4]string{
				{"cpu", pods, "cpu.shares", "1945"},
				{"memory", pods, "memory.limit_in_bytes", "25128075264"},
				{"pids", pods, "pids.max", "4194304"},
				// New cpusets below the pods cgroup get their CPUs from the kernel, not from writes.
				{"cpuset", pods, "cgroup.clone_children", "1"},
				{"cpuset", burstable, "cgroup.clone_children", "1"},
				{"cpuset", bestEffort, "cgroup.clone_children", "1"},
				{"cpuset", burstable, "cpuset.cpus", "0-1"},
				{"cpuset", bestEffort, "cpuset.mems", "0"},
				{"cpu", burstable, "cpu.shares", "2"},
				{"cpu", bestEffort, "cpu.shares", "2"},
			} {
				assertFile(t, h, want[0], want[1], want[2], want[3])
			}
			for _, c := range []string{"cpuacct", "freezer", "blkio"} {
				if !dirExists(h.dir(c, bestEffort)) {
					t.Errorf("%s hierarchy: %s not created", c, bestEffort)
				}
			}
			if dirExists(h.dir("devices", pods)) {
				t.Errorf("devices hierarchy: %s created; device rules belong to containers", pods)
			}
		})
	}
}

func assertFile(t *testing.T, h *fakeHost, controller, dir, file, want string) {
	t.Helper()
	if got := h.read(controller, dir, file); got != want {
		t.Errorf("%s %s/%s = %q, want %q", controller, dir, file, got, want)
	}
}

func assertNoFile(t *testing.T, h *fakeHost, controller, dir, file string) {
	t.Helper()
	if fileExists(filepath.Join(h.dir(controller, dir), file)) {
		t.Errorf("%s %s/%s written, want untouched", controller, dir, file)
	}
}

func TestEnsurePod(t *testing.T) {
	for _, hc := range hostCases {
		t.Run(hc.name, func(t *testing.T) {
			h := newFakeHost(t, hc.mode)
			cfg := h.config(hc.driver)
			cfg.Pod.PodPidsLimit = 1024
			m, err := newManager(cfg, h.deps(hc.driver))
			if err != nil {
				t.Fatal(err)
			}
			ctx := testContext(t)
			if _, err := m.EnsurePod(ctx, guaranteedPod("g1")); err != ErrNotStarted {
				t.Fatalf("EnsurePod before Start = %v, want ErrNotStarted", err)
			}
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				pod        *v1.Pod
				wantParent string
				dir        string
				v1Files    [][3]string // controller, file, value
				v2Files    [][2]string
				unwritten  []string // files on v1 cpu / v2 that must not be written
			}{
				{
					pod: guaranteedPod("g1"),
					wantParent: map[Driver]string{DriverCgroupfs: "/kubepods/podg1",
						DriverSystemd: "kubepods-podg1.slice"}[hc.driver],
					dir: rel(hc.driver, "kubepods", "podg1"),
					v1Files: [][3]string{{"cpu", "cpu.shares", "512"}, {"cpu", "cpu.cfs_period_us", "100000"},
						{"cpu", "cpu.cfs_quota_us", "50000"}, {"memory", "memory.limit_in_bytes", "134217728"},
						{"pids", "pids.max", "1024"}},
					v2Files: [][2]string{{"cpu.weight", "20"}, {"cpu.max", "50000 100000"}, {"memory.max", "134217728"},
						{"pids.max", "1024"}, {"hugetlb.2MB.max", "0"}, {"hugetlb.1GB.max", "0"}},
				},
				{
					pod: burstablePod("b-1"),
					wantParent: map[Driver]string{DriverCgroupfs: "/kubepods/burstable/podb-1",
						DriverSystemd: "kubepods-burstable-podb_1.slice"}[hc.driver],
					dir: rel(hc.driver, "kubepods", "burstable", "podb-1"),
					v1Files: [][3]string{{"cpu", "cpu.shares", "256"}, {"cpu", "cpu.cfs_quota_us", "100000"},
						{"memory", "memory.limit_in_bytes", "268435456"}},
					v2Files: [][2]string{{"cpu.weight", "10"}, {"cpu.max", "100000 100000"}, {"memory.max", "268435456"}},
				},
				{
					pod: bestEffortPod("e1"),
					wantParent: map[Driver]string{DriverCgroupfs: "/kubepods/besteffort/pode1",
						DriverSystemd: "kubepods-besteffort-pode1.slice"}[hc.driver],
					dir:       rel(hc.driver, "kubepods", "besteffort", "pode1"),
					v1Files:   [][3]string{{"cpu", "cpu.shares", "2"}, {"pids", "pids.max", "1024"}},
					v2Files:   [][2]string{{"cpu.weight", "1"}, {"pids.max", "1024"}},
					unwritten: []string{"cpu.cfs_quota_us", "cpu.max", "memory.limit_in_bytes", "memory.max"},
				},
			}
			for _, tt := range tests {
				parent, err := m.EnsurePod(ctx, tt.pod)
				if err != nil {
					t.Fatalf("EnsurePod(%s): %v", tt.pod.UID, err)
				}
				if parent != tt.wantParent {
					t.Errorf("EnsurePod(%s) parent = %q, want %q", tt.pod.UID, parent, tt.wantParent)
				}
				if hc.mode.unified() {
					for _, f := range tt.v2Files {
						assertFile(t, h, "", tt.dir, f[0], f[1])
					}
				} else {
					for _, f := range tt.v1Files {
						assertFile(t, h, f[0], tt.dir, f[1], f[2])
					}
				}
				for _, f := range tt.unwritten {
					c := "cpu"
					if strings.HasPrefix(f, "memory") {
						c = "memory"
					}
					assertNoFile(t, h, c, tt.dir, f)
				}
			}
			// The Burstable cgroup follows its pods: 250m -> 256 shares.
			burstable := rel(hc.driver, "kubepods", "burstable")
			if hc.mode.unified() {
				assertFile(t, h, "", burstable, "cpu.weight", "10")
			} else {
				assertFile(t, h, "cpu", burstable, "cpu.shares", "256")
			}
			// Ensuring again is idempotent.
			if _, err := m.EnsurePod(ctx, burstablePod("b-1")); err != nil {
				t.Fatalf("EnsurePod again: %v", err)
			}
			uids, err := m.PodCgroups()
			if err != nil || !slices.Equal(uids, []types.UID{"b-1", "e1", "g1"}) {
				t.Errorf("PodCgroups = %v, %v", uids, err)
			}
		})
	}
}

func TestRemovePodKillsAndRemoves(t *testing.T) {
	for _, hc := range hostCases {
		t.Run(hc.name, func(t *testing.T) {
			h := newFakeHost(t, hc.mode)
			m := h.start(hc.driver)
			ctx := testContext(t)
			pod := burstablePod("b1")
			if _, err := m.EnsurePod(ctx, pod); err != nil {
				t.Fatal(err)
			}
			podDir := rel(hc.driver, "kubepods", "burstable", "podb1")
			// The runtime made a container cgroup with a process in it,
			// and left another process in the pod cgroup itself.
			for _, c := range m.layout.controllers {
				h.write(c, podDir, "cgroup.procs", "4242\n")
				h.write(c, podDir+"/ctr1", "cgroup.procs", "4243\n")
			}
			if !hc.mode.unified() {
				// runc also places containers in hierarchies the pod sets no limits in.
				for _, other := range []string{"devices", "systemd"} {
					h.write(other, podDir+"/ctr1", "cgroup.procs", "")
				}
			}
			if err := m.RemovePod(ctx, pod.UID); err != nil {
				t.Fatalf("RemovePod: %v", err)
			}
			if !slices.Contains(h.killed, 4242) || !slices.Contains(h.killed, 4243) {
				t.Errorf("killed %v, want 4242 and 4243", h.killed)
			}
			for _, d := range h.dirs() {
				if strings.Contains(d, "podb1") {
					t.Errorf("%s left behind", d)
				}
			}
			burstable := rel(hc.driver, "kubepods", "burstable")
			if hc.mode.unified() {
				assertFile(t, h, "", burstable, "cpu.weight", "1")
			} else {
				assertFile(t, h, "cpu", burstable, "cpu.shares", "2")
			}
			if err := m.RemovePod(ctx, pod.UID); err != nil {
				t.Errorf("RemovePod of a removed pod = %v, want nil", err)
			}
		})
	}
}

func TestRemovePodStuckProcess(t *testing.T) {
	h := newFakeHost(t, ModeV1)
	m := h.start(DriverCgroupfs)
	ctx := testContext(t)
	if _, err := m.EnsurePod(ctx, bestEffortPod("e1")); err != nil {
		t.Fatal(err)
	}
	h.write("pids", "/kubepods/besteffort/pode1", "cgroup.procs", "777\n")
	h.immortal[777] = true
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err := m.RemovePod(cctx, "e1")
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("RemovePod with a process that does not die = %v, want a context error", err)
	}
	if !dirExists(h.dir("pids", "/kubepods/besteffort/pode1")) {
		t.Error("cgroup removed while a process is still in it")
	}
	// Never kills init or itself, whatever a cgroup.procs file says.
	h.write("pids", "/kubepods/besteffort/pode1", "cgroup.procs", "1\n")
	if err := m.RemovePod(ctx, "e1"); err == nil || !strings.Contains(err.Error(), "refusing to kill process 1") {
		t.Errorf("RemovePod with pid 1 in the cgroup = %v, want refusal", err)
	}
}

// After the first full pass, housekeeping's passes read one hierarchy each: a cgroup a crash left in one
// hierarchy only is still removed within one round of them, and an active pod's is kept.
func TestCleanupOrphansRotates(t *testing.T) {
	for _, hc := range hostCases {
		t.Run(hc.name, func(t *testing.T) {
			h := newFakeHost(t, hc.mode)
			m := h.start(hc.driver)
			ctx := t.Context()
			if _, err := m.EnsurePod(ctx, bestEffortPod("a")); err != nil {
				t.Fatal(err)
			}
			if err := m.CleanupOrphans(ctx, map[types.UID]bool{"a": true}); err != nil {
				t.Fatal(err)
			}
			last := slices.Max(m.layout.controllers) // the last one a round reads
			h.write(last, rel(hc.driver, "kubepods", "besteffort", "podhalf"), "cgroup.procs", "")
			rounds := len(m.layout.hierarchies())
			for i := 0; i < rounds; i++ {
				if err := m.CleanupOrphans(ctx, map[types.UID]bool{"a": true}); err != nil {
					t.Fatal(err)
				}
			}
			uids, err := m.PodCgroups()
			if err != nil || !slices.Equal(uids, []types.UID{"a"}) {
				t.Errorf("PodCgroups after %d passes = %v, %v; want [a]", rounds, uids, err)
			}
		})
	}
}

func TestCleanupOrphans(t *testing.T) {
	for _, hc := range hostCases {
		t.Run(hc.name, func(t *testing.T) {
			h := newFakeHost(t, hc.mode)
			m := h.start(hc.driver)
			sink := &logSink{}
			ctx := klog.NewContext(t.Context(), sink.logger())
			for _, p := range []*v1.Pod{guaranteedPod("a"), burstablePod("b"), bestEffortPod("c")} {
				if _, err := m.EnsurePod(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			// A pod cgroup from before a restart, with a process in it.
			orphan := rel(hc.driver, "kubepods", "besteffort", "pod0rphan-1")
			for _, c := range m.layout.controllers {
				h.write(c, orphan, "cgroup.procs", "5150\n")
			}
			if err := m.CleanupOrphans(ctx, map[types.UID]bool{"a": true, "b": true}); err != nil {
				t.Fatalf("CleanupOrphans: %v", err)
			}
			uids, err := m.PodCgroups()
			if err != nil || !slices.Equal(uids, []types.UID{"a", "b"}) {
				t.Errorf("PodCgroups after cleanup = %v, %v; want [a b]", uids, err)
			}
			if !slices.Contains(h.killed, 5150) {
				t.Errorf("killed %v, want 5150", h.killed)
			}
			if n := sink.contains(`"msg"="Removed orphaned pod cgroup"`); n != 2 {
				t.Errorf("%d orphan log lines, want 2: %v", n, sink.lines)
			}
			if sink.contains(`"podUID"="0rphan-1"`) == 0 {
				t.Errorf("no log line names the orphan: %v", sink.lines)
			}
			// Burstable b is still counted.
			if hc.mode.unified() {
				assertFile(t, h, "", rel(hc.driver, "kubepods", "burstable"), "cpu.weight", "10")
			} else {
				assertFile(t, h, "cpu", rel(hc.driver, "kubepods", "burstable"), "cpu.shares", "256")
			}
		})
	}
}
