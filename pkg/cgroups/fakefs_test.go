package cgroups

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
)

// Root-level files of a v1 host, as the kernel shows them (Debian 12,
// kernel 6.x, values from this machine).
var v1RootFiles = map[string]map[string]string{
	"cpu": {
		"cpu.shares": "1024\n", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n",
		"cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n", "cgroup.procs": "1\n",
	},
	"cpuacct": {"cpuacct.usage": "987654321000\n", "cgroup.procs": "1\n"},
	"cpuset":  {"cpuset.cpus": "0-1\n", "cpuset.mems": "0\n", "cgroup.procs": "1\n"},
	"memory": {
		"memory.limit_in_bytes": "9223372036854771712\n", "memory.usage_in_bytes": "8589934592\n",
		"memory.stat":  v1MemoryStat(8589934592, 1073741824, 2147483648),
		"cgroup.procs": "1\n",
	},
	"pids":    {"cgroup.procs": "1\n"},
	"freezer": {"cgroup.procs": "1\n"},
	"blkio":   {"cgroup.procs": "1\n"},
	"devices": {"cgroup.procs": "1\n"},
	"systemd": {"cgroup.procs": "1\n"},
}

// v1MemoryStat is memory.stat in the v1 format, with hierarchical totals.
func v1MemoryStat(cache, rss, inactiveFile uint64) string {
	var b strings.Builder
	for _, prefix := range []string{"", "total_"} {
		for _, kv := range []struct {
			k string
			v uint64
		}{
			{"cache", cache}, {"rss", rss}, {"rss_huge", 0}, {"shmem", 0}, {"mapped_file", 4096},
			{"dirty", 0}, {"writeback", 0}, {"pgpgin", 100}, {"pgpgout", 50}, {"pgfault", 1000},
			{"pgmajfault", 1}, {"inactive_anon", 0}, {"active_anon", rss}, {"inactive_file", inactiveFile},
			{"active_file", cache - min(cache, inactiveFile)}, {"unevictable", 0},
		} {
			b.WriteString(prefix + kv.k + " " + strconv.FormatUint(kv.v, 10) + "\n")
		}
		if prefix == "" {
			b.WriteString("hierarchical_memory_limit 9223372036854771712\n")
		}
	}
	return b.String()
}

// v2MemoryStat is memory.stat in the v2 format (abridged).
func v2MemoryStat(anon, file, inactiveFile uint64) string {
	return "anon " + strconv.FormatUint(anon, 10) + "\nfile " + strconv.FormatUint(file, 10) +
		"\nkernel 1048576\nkernel_stack 65536\npagetables 131072\nsock 0\nshmem 0\nfile_mapped 0\nfile_dirty 0\n" +
		"inactive_anon 0\nactive_anon " + strconv.FormatUint(anon, 10) +
		"\ninactive_file " + strconv.FormatUint(inactiveFile, 10) +
		"\nactive_file " + strconv.FormatUint(file-min(file, inactiveFile), 10) + "\nunevictable 0\npgfault 10\n"
}

// fakeHost is a cgroup tree in a temporary directory, plus a process
// table the injected kill function acts on.
type fakeHost struct {
	t    *testing.T
	root string
	proc string
	mode Mode

	mu     sync.Mutex
	killed []int
	// immortal processes ignore SIGKILL (a stuck process).
	immortal map[int]bool
}

type fakeOpt func(*fakeHost, map[string]map[string]string)

// withoutController drops a v1 hierarchy or a v2 controller.
func withoutController(c string) fakeOpt {
	return func(h *fakeHost, files map[string]map[string]string) {
		if h.mode.unified() {
			f := files[""]
			f["cgroup.controllers"] = strings.Replace(f["cgroup.controllers"], c+" ", "", 1)
			return
		}
		delete(files, c)
	}
}

// withHugetlb adds the hugetlb controller (v1 hierarchy; v2 has it).
func withHugetlb() fakeOpt {
	return func(h *fakeHost, files map[string]map[string]string) {
		if !h.mode.unified() {
			files["hugetlb"] = map[string]string{"cgroup.procs": "1\n"}
		}
	}
}

func newFakeHost(t *testing.T, mode Mode, opts ...fakeOpt) *fakeHost {
	t.Helper()
	h := &fakeHost{t: t, root: filepath.Join(t.TempDir(), "cgroup"), proc: t.TempDir(), mode: mode, immortal: map[int]bool{}}
	files := map[string]map[string]string{}
	if mode.unified() {
		files[""] = map[string]string{
			"cgroup.controllers":     "cpuset cpu io memory hugetlb pids rdma misc\n",
			"cgroup.subtree_control": "",
			"cgroup.procs":           "1\n",
			"cpu.stat":               "usage_usec 987654321\nuser_usec 600000000\nsystem_usec 387654321\n",
			"memory.stat":            v2MemoryStat(1<<30, 2<<30, 1<<30),
		}
	} else {
		for c, f := range v1RootFiles {
			files[c] = maps.Clone(f)
		}
	}
	for _, o := range opts {
		o(h, files)
	}
	for dir, fs := range files {
		mustMkdir(t, filepath.Join(h.root, dir))
		for name, content := range fs {
			mustWrite(t, filepath.Join(h.root, dir, name), content)
		}
	}
	if mode == ModeHybrid {
		mustMkdir(t, filepath.Join(h.root, "unified"))
		mustWrite(t, filepath.Join(h.root, "unified", "cgroup.controllers"), "hugetlb\n")
	}
	mustWrite(t, filepath.Join(h.proc, "meminfo"),
		"MemTotal:       25165824 kB\nMemFree:        20971520 kB\nMemAvailable:   23068672 kB\n"+
			"Inactive(file):  1048576 kB\nAnonPages:       524288 kB\n")
	mustWrite(t, filepath.Join(h.proc, "loadavg"), "0.08 0.03 0.01 2/345 67890\n")
	return h
}

// config is a node of 2 CPUs and 24 GiB with upstream's hard eviction.
func (h *fakeHost) config(driver Driver) Config {
	return Config{
		Root:          h.root,
		Driver:        driver,
		Capacity:      rl("cpu=2,memory=24Gi,pid=4194304"),
		KubeReserved:  rl("cpu=100m,memory=512Mi"),
		EvictionHard:  rl("memory=100Mi"),
		ProcRoot:      h.proc,
		HugePageSizes: []int64{2 << 20, 1 << 30},
		Clock:         testingclock.NewFakeClock(time.Unix(0, 0)),
	}
}

// deps are host operations acting on the fake tree: systemd is running,
// every directory is writable, kill takes the process out of every
// cgroup.procs (the kernel does that when it exits).
func (h *fakeHost) deps(driver Driver) deps {
	d := deps{
		systemdRunning: func() bool { return true },
		access:         func(string) error { return nil },
		kill:           h.kill,
	}
	if driver == DriverSystemd {
		d.newApplier = func(l layout, huge []int64) applier { return fileApplier{layout: l, hugeSizes: huge} }
	}
	return d
}

func (h *fakeHost) kill(pid int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.killed = append(h.killed, pid)
	if h.immortal[pid] {
		return nil
	}
	found := false
	err := filepath.WalkDir(h.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" || p == filepath.Join(h.root, "cgroup.procs") {
			return err
		}
		pids, err := readProcs(p)
		if err != nil {
			return err
		}
		if i := slices.Index(pids, pid); i >= 0 {
			found = true
			pids = slices.Delete(pids, i, i+1)
			var b strings.Builder
			for _, p := range pids {
				b.WriteString(strconv.Itoa(p) + "\n")
			}
			return os.WriteFile(p, []byte(b.String()), 0o644)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return syscall.ESRCH
	}
	return nil
}

// start builds and starts a Manager on the fake host.
func (h *fakeHost) start(driver Driver) *Manager {
	h.t.Helper()
	m, err := newManager(h.config(driver), h.deps(driver))
	if err != nil {
		h.t.Fatalf("newManager: %v", err)
	}
	if err := m.Start(testContext(h.t)); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	return m
}

// dir is the directory of a cgroup path (as the runtime would be given it)
// in one controller's hierarchy.
func (h *fakeHost) dir(controller, rel string) string {
	if h.mode.unified() {
		controller = ""
	}
	return filepath.Join(h.root, controller, rel)
}

// read returns a file's trimmed content, failing the test if it is absent.
func (h *fakeHost) read(controller, rel, file string) string {
	h.t.Helper()
	raw, err := os.ReadFile(filepath.Join(h.dir(controller, rel), file))
	if err != nil {
		h.t.Fatalf("read %s: %v", file, err)
	}
	return strings.TrimSpace(string(raw))
}

func (h *fakeHost) write(controller, rel, file, content string) {
	h.t.Helper()
	mustMkdir(h.t, h.dir(controller, rel))
	mustWrite(h.t, filepath.Join(h.dir(controller, rel), file), content)
}

// dirs lists every directory under the root (relative), for checks that
// nothing was left behind.
func (h *fakeHost) dirs() []string {
	var out []string
	_ = filepath.WalkDir(h.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			rel, _ := filepath.Rel(h.root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// logSink collects log lines for checks.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, args)
	}, funcr.Options{Verbosity: 4})
}

func (s *logSink) contains(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

func testContext(t *testing.T) context.Context {
	return klog.NewContext(t.Context(), funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{Verbosity: 4}))
}
