package cgroups

import (
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/cgroups/systemd"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// TestHostCgroups runs the QoS tree, a Guaranteed, a Burstable and a
// BestEffort pod, process kill, stats and orphan cleanup on this machine's
// real cgroups (v1, hybrid or v2) through opencontainers/cgroups, with each
// driver the host supports, and checks the kernel's files. It works under a
// test-unique pods cgroup and removes everything it made. hack/vm runs it
// on cgroup v2 with systemd as PID 1.
func TestHostCgroups(t *testing.T) {
	for _, driver := range []Driver{DriverCgroupfs, DriverSystemd} {
		t.Run(string(driver), func(t *testing.T) {
			if os.Geteuid() != 0 {
				t.Skip("needs root: creates and removes cgroups under /sys/fs/cgroup")
			}
			if _, err := DetectMode(HostRoot); err != nil {
				t.Skipf("needs cgroups at %s: %v", HostRoot, err)
			}
			if driver == DriverSystemd && !systemd.IsRunningSystemd() {
				t.Skip("needs systemd as PID 1 (no /run/systemd/system); hack/vm runs it")
			}
			testHost(t, driver)
		})
	}
}

// hostPod is one pod of the host test and what the kernel must show.
type hostPod struct {
	pod      *v1.Pod
	qos      v1.PodQOSClass
	shares   uint64
	quota    int64 // -1: none
	memLimit int64 // 0: none
}

func testHost(t *testing.T, driver Driver) {
	top := "kubepods-test-" + strings.ToLower(rand.Text()[:8])
	m, err := New(Config{
		Driver:       driver,
		CgroupRoot:   "/" + top,
		KubeReserved: rl("cpu=100m,memory=256Mi"),
		EvictionHard: rl("memory=100Mi"),
		Pod:          PodOptions{PodPidsLimit: 512},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.apply.(libApplier); !ok {
		t.Fatalf("applier %T, want opencontainers/cgroups on the host root", m.apply)
	}
	ctx := testContext(t)
	t.Cleanup(func() { removeHostTree(t, m) })
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	k := hostKernel{t: t, m: m}
	pods := cgroupName{top}
	alloc := m.Allocatable()
	k.checkCPU(pods, podfacts.MilliCPUToShares(alloc.Cpu().MilliValue()), -2)
	k.checkMemory(pods, alloc.Memory().Value())
	k.checkCPU(qosName(pods, v1.PodQOSBestEffort), 2, -2)
	k.checkCPU(qosName(pods, v1.PodQOSBurstable), 2, -2)

	cases := []hostPod{
		{guaranteedPod("g-" + top), v1.PodQOSGuaranteed, 512, 50000, 128 << 20},
		{burstablePod("b-" + top), v1.PodQOSBurstable, 256, 100000, 256 << 20},
		{bestEffortPod("e-" + top), v1.PodQOSBestEffort, 2, -1, 0},
	}
	for _, c := range cases {
		parent, err := m.EnsurePod(ctx, c.pod)
		if err != nil {
			t.Fatalf("EnsurePod(%s): %v", c.pod.UID, err)
		}
		name := podName(pods, c.qos, c.pod.UID)
		want := name.cgroupfs()
		if driver == DriverSystemd {
			want = name.systemdUnit()
		}
		if parent != want {
			t.Errorf("parent = %q, want %q", parent, want)
		}
		k.checkCPU(name, c.shares, c.quota)
		k.checkMemory(name, c.memLimit)
		k.check(name, "pids", "pids.max", "512")
	}
	k.checkCPU(qosName(pods, v1.PodQOSBurstable), 256, -2)

	// A process in a container cgroup under the Burstable pod, as runc
	// would place it. It execs sleep only once it is in the pod's cgroup:
	// the kernel charges memory to the cgroup a process is in when it
	// allocates, never what it allocated before it moved.
	burst := podName(pods, v1.PodQOSBurstable, cases[1].pod.UID)
	cmd := exec.Command("sh", "-c", "read x; exec sleep 300")
	placed, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	for c, dir := range m.layout.paths(burst) {
		ctr := filepath.Join(dir, "ctr1")
		if err := os.Mkdir(ctr, 0o755); err != nil {
			t.Fatal(err)
		}
		if c == "cpuset" {
			// The kernel gave it the pod's CPUs and memory nodes as it made
			// it, so runc finds them there and writes nothing.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				raw, err := os.ReadFile(filepath.Join(ctr, f))
				if got, want := strings.TrimSpace(string(raw)), k.read(burst, "cpuset", f); err != nil || got != want {
					t.Errorf("new container cgroup: %s = %q (%v), want the pod's %q", f, got, err, want)
				}
			}
		}
		mustWrite(t, filepath.Join(ctr, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid))
	}
	if _, err := placed.Write([]byte("placed\n")); err != nil {
		t.Fatal(err)
	}
	st := podStatsWithMemory(t, m, cases[1].pod.UID)
	if st.Processes != 1 || st.MemoryUsageBytes == 0 {
		t.Errorf("PodStats = %+v, want 1 process and some memory", st)
	}
	node, err := m.NodeStats(ctx)
	if err != nil || node.CPUUsageNanos == 0 || node.MemoryWorkingSetBytes == 0 || node.Processes == 0 {
		t.Errorf("NodeStats = %+v, %v", node, err)
	}

	if err := m.RemovePod(ctx, cases[1].pod.UID); err != nil {
		t.Fatalf("RemovePod: %v", err)
	}
	var exitErr *exec.ExitError
	if err := <-waited; !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("process in the pod cgroup ended with %v, want SIGKILL", err)
	}
	for _, dir := range m.layout.paths(burst) {
		if dirExists(dir) {
			t.Errorf("%s left after RemovePod", dir)
		}
	}
	k.checkCPU(qosName(pods, v1.PodQOSBurstable), 2, -2)

	// Housekeeping: only the Guaranteed pod is still wanted.
	if err := m.CleanupOrphans(ctx, map[types.UID]bool{cases[0].pod.UID: true}); err != nil {
		t.Fatalf("CleanupOrphans: %v", err)
	}
	uids, err := m.PodCgroups()
	if err != nil || len(uids) != 1 || uids[0] != cases[0].pod.UID {
		t.Errorf("PodCgroups = %v, %v; want only the Guaranteed pod", uids, err)
	}
	if err := m.RemovePod(ctx, cases[0].pod.UID); err != nil {
		t.Fatal(err)
	}
}

// podStatsWithMemory returns the pod's statistics once its cgroup shows
// memory in use (the exec of its process has been charged), or after 10 s.
func podStatsWithMemory(t *testing.T, m *Manager, uid types.UID) Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := m.PodStats(testContext(t), uid)
		if err != nil {
			t.Fatal(err)
		}
		if st.MemoryUsageBytes > 0 || time.Now().After(deadline) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hostKernel reads and checks the kernel's cgroup files.
type hostKernel struct {
	t *testing.T
	m *Manager
}

func (k hostKernel) read(n cgroupName, controller, file string) string {
	k.t.Helper()
	raw, err := os.ReadFile(filepath.Join(k.m.layout.dir(n, controller), file))
	if err != nil {
		k.t.Fatalf("kernel file: %v", err)
	}
	return strings.TrimSpace(string(raw))
}

func (k hostKernel) check(n cgroupName, controller, file, want string) {
	k.t.Helper()
	if got := k.read(n, controller, file); got != want {
		k.t.Errorf("%s/%s = %q, want %q", k.m.layout.dir(n, controller), file, got, want)
	}
}

// checkCPU checks shares (weight on v2) and, unless quota is -2, the CFS
// quota (-1: none) with upstream's 100 ms period.
func (k hostKernel) checkCPU(n cgroupName, shares uint64, quota int64) {
	k.t.Helper()
	if k.m.Mode().unified() {
		k.check(n, "", "cpu.weight", strconv.FormatUint(podfacts.SharesToWeight(shares), 10))
		if quota != -2 {
			q := "max"
			if quota >= 0 {
				q = strconv.FormatInt(quota, 10)
			}
			k.check(n, "", "cpu.max", q+" 100000")
		}
		return
	}
	k.check(n, "cpu", "cpu.shares", strconv.FormatUint(shares, 10))
	if quota != -2 {
		k.check(n, "cpu", "cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
		k.check(n, "cpu", "cpu.cfs_period_us", "100000")
	}
}

// checkMemory checks the memory limit; 0 is the kernel's "no limit".
func (k hostKernel) checkMemory(n cgroupName, limit int64) {
	k.t.Helper()
	if k.m.Mode().unified() {
		want := "max"
		if limit > 0 {
			want = strconv.FormatInt(limit, 10)
		}
		k.check(n, "", "memory.max", want)
		return
	}
	if limit > 0 {
		k.check(n, "memory", "memory.limit_in_bytes", strconv.FormatInt(limit, 10))
		return
	}
	if got := k.read(n, "memory", "memory.limit_in_bytes"); len(got) < 18 {
		k.t.Errorf("memory.limit_in_bytes = %s, want the kernel's unlimited value", got)
	}
}

// removeHostTree removes the test's pods and QoS cgroups.
func removeHostTree(t *testing.T, m *Manager) {
	ctx := testContext(t)
	if m.isStarted() {
		if err := m.CleanupOrphans(ctx, nil); err != nil {
			t.Errorf("cleanup pods: %v", err)
		}
	}
	for _, n := range []cgroupName{
		qosName(m.podsName, v1.PodQOSBestEffort), qosName(m.podsName, v1.PodQOSBurstable), m.podsName,
	} {
		if err := m.apply.destroy(m.spec(n, nil)); err != nil {
			t.Errorf("remove %s: %v", n.cgroupfs(), err)
		}
	}
	for _, dir := range m.layout.paths(m.podsName) {
		if dirExists(dir) {
			t.Errorf("%s left behind", dir)
		}
	}
}
