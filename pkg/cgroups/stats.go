package cgroups

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"k8s.io/apimachinery/pkg/types"
)

// Stats are the usage figures of one cgroup (or of the node), read from
// the cgroup files; the caller stamps them with its clock.
type Stats struct {
	// CPUUsageNanos is the cumulative CPU time used.
	CPUUsageNanos uint64
	// MemoryUsageBytes is the memory charged, page cache included.
	MemoryUsageBytes uint64
	// MemoryWorkingSetBytes is usage minus inactive file pages, the
	// figure eviction and the summary API use.
	MemoryWorkingSetBytes uint64
	// MemoryRSSBytes is anonymous memory.
	MemoryRSSBytes uint64
	// Processes is the number of tasks (pids.current; for the node, the
	// kernel's thread count).
	Processes uint64
	// PageFaults and MajorPageFaults count the faults of the cgroup's tasks
	// (memory.stat's pgfault and pgmajfault; zero for the node).
	PageFaults, MajorPageFaults uint64
	// Pressure is the cgroup's pressure stall information (Config.PSI, on
	// cgroup v2 only; for the node the root cgroup's, else /proc/pressure's).
	Pressure Pressure
}

// PodStats reads the statistics of a pod's cgroup; ErrNotFound when the
// pod has none.
func (m *Manager) PodStats(ctx context.Context, uid types.UID) (Stats, error) {
	name, err := m.podCgroup(uid)
	if err != nil {
		return Stats{}, err
	}
	st, err := m.cgroupStats(name)
	if err != nil {
		return Stats{}, fmt.Errorf("stats of pod %q: %w", uid, err)
	}
	return st, nil
}

// PodsStats reads the statistics of the pods cgroup: all pods together.
func (m *Manager) PodsStats(ctx context.Context) (Stats, error) {
	st, err := m.cgroupStats(m.podsName)
	if err != nil {
		return Stats{}, fmt.Errorf("stats of pods cgroup: %w", err)
	}
	return st, nil
}

// NodeStats reads the statistics of the whole node: the root cgroup's CPU
// usage; memory from the root cgroup on v1 and from meminfo on v2 (whose
// root cgroup has no memory.current); the kernel's thread count.
func (m *Manager) NodeStats(ctx context.Context) (Stats, error) {
	var st Stats
	var err error
	if m.layout.mode.unified() {
		st.CPUUsageNanos, err = cpuUsageV2(m.cfg.Root)
		if err == nil {
			err = m.meminfoStats(&st)
		}
	} else {
		st.CPUUsageNanos, err = readUint(filepath.Join(m.cfg.Root, "cpuacct"), "cpuacct.usage")
		if err == nil {
			err = memoryStatsV1(filepath.Join(m.cfg.Root, "memory"), &st)
		}
	}
	if err == nil {
		st.Processes, err = threadCount(m.cfg.ProcRoot)
	}
	if err != nil {
		return Stats{}, fmt.Errorf("node stats: %w", err)
	}
	if m.cfg.PSI && m.layout.mode.unified() {
		// The root cgroup's pressure files are the host's; kernels that lack them there have /proc/pressure.
		if st.Pressure = readPressure(m.cfg.Root, ".pressure"); st.Pressure == (Pressure{}) {
			st.Pressure = readPressure(filepath.Join(m.cfg.ProcRoot, "pressure"), "")
		}
	}
	return st, nil
}

// NodeMemoryWorkingSet reads the node's memory working set alone, as NodeStats computes it: cheap enough to
// read several times a second (the eviction manager's memory watch).
func (m *Manager) NodeMemoryWorkingSet() (uint64, error) {
	var st Stats
	var err error
	if m.layout.mode.unified() {
		err = m.meminfoStats(&st)
	} else {
		err = memoryStatsV1(filepath.Join(m.cfg.Root, "memory"), &st)
	}
	if err != nil {
		return 0, fmt.Errorf("node memory: %w", err)
	}
	return st.MemoryWorkingSetBytes, nil
}

func (m *Manager) cgroupStats(name cgroupName) (Stats, error) {
	return m.statsIn(func(controller string) string { return m.layout.dir(name, controller) })
}

// statsIn reads the statistics of the cgroup whose directory in a controller's hierarchy dirOf gives.
func (m *Manager) statsIn(dirOf func(controller string) string) (Stats, error) {
	var st Stats
	var err error
	if m.layout.mode.unified() {
		dir := dirOf("")
		st.CPUUsageNanos, err = cpuUsageV2(dir)
		if err == nil {
			err = memoryStatsV2(dir, &st)
		}
		if err == nil {
			st.Processes, err = readUint(dir, "pids.current")
		}
		if err == nil && m.cfg.PSI {
			st.Pressure = readPressure(dir, ".pressure")
		}
		return st, err
	}
	st.CPUUsageNanos, err = readUint(dirOf("cpuacct"), "cpuacct.usage")
	if err == nil {
		err = memoryStatsV1(dirOf("memory"), &st)
	}
	if err == nil {
		st.Processes, err = readUint(dirOf("pids"), "pids.current")
	}
	return st, err
}

// ContainersStats reads the statistics of the cgroups below the pod's of the containers with the given IDs
// (every one, the sandbox's included, for nil), by container ID: the directory's name, or for a systemd
// scope "<prefix>-<id>.scope" its ID. ErrNotFound when the pod has no cgroup; a container that goes away
// meanwhile is left out.
func (m *Manager) ContainersStats(ctx context.Context, uid types.UID, ids []string) (map[string]Stats, error) {
	name, err := m.podCgroup(uid)
	if err != nil {
		return nil, err
	}
	controller := "cpuacct"
	if m.layout.mode.unified() {
		controller = ""
	}
	entries, err := os.ReadDir(m.layout.dir(name, controller))
	if err != nil {
		return nil, fmt.Errorf("containers of pod %q: %w", uid, err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	out := map[string]Stats{}
	for _, e := range entries {
		if !e.IsDir() || ids != nil && !want[containerIDFromDir(e.Name())] {
			continue
		}
		st, err := m.statsIn(func(c string) string { return filepath.Join(m.layout.dir(name, c), e.Name()) })
		if err != nil {
			continue // gone meanwhile, or not a container's
		}
		out[containerIDFromDir(e.Name())] = st
	}
	return out, nil
}

// containerIDFromDir is the container ID a container cgroup's directory names: the name itself (cgroupfs),
// or the ID of a systemd scope ("cri-containerd-<id>.scope", "nodeagent-<id>.scope").
func containerIDFromDir(dir string) string {
	if unit, ok := strings.CutSuffix(dir, ".scope"); ok {
		return unit[strings.LastIndex(unit, "-")+1:]
	}
	return dir
}

// PodPID returns a process of the pod, found in its cgroup tree (the pids hierarchy on v1), so that what lives
// in the pod's namespaces (its network interfaces) can be read through /proc; 0 when none runs.
func (m *Manager) PodPID(uid types.UID) (int, error) {
	name, err := m.podCgroup(uid)
	if err != nil {
		return 0, err
	}
	controller := "pids"
	if m.layout.mode.unified() {
		controller = ""
	}
	pid := 0
	err = filepath.WalkDir(m.layout.dir(name, controller), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || pid != 0 {
			return nil
		}
		raw, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		if first, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n"); first != "" {
			if n, err := strconv.Atoi(first); err == nil && n > 0 {
				pid = n
				return filepath.SkipAll
			}
		}
		return nil
	})
	return pid, err
}

// memoryStatsV1 reads memory.usage_in_bytes and the hierarchical totals of memory.stat.
func memoryStatsV1(dir string, st *Stats) error {
	return memoryStats(dir, "memory.usage_in_bytes", "total_inactive_file", "total_rss", "total_pgfault", "total_pgmajfault", st)
}

// memoryStatsV2 reads memory.current and memory.stat.
func memoryStatsV2(dir string, st *Stats) error {
	return memoryStats(dir, "memory.current", "inactive_file", "anon", "pgfault", "pgmajfault", st)
}

// memoryStats reads usage from usageFile and the inactive file, RSS and fault figures from memory.stat's keys.
func memoryStats(dir, usageFile, inactiveKey, rssKey, faultKey, majorKey string, st *Stats) error {
	usage, err := readUint(dir, usageFile)
	if err != nil {
		return err
	}
	kv, err := readKeyValues(filepath.Join(dir, "memory.stat"), inactiveKey, rssKey, faultKey, majorKey)
	if err != nil {
		return err
	}
	st.MemoryUsageBytes = usage
	st.MemoryWorkingSetBytes = workingSet(usage, kv[inactiveKey])
	st.MemoryRSSBytes = kv[rssKey]
	st.PageFaults, st.MajorPageFaults = kv[faultKey], kv[majorKey]
	return nil
}

// meminfoStats fills node memory from /proc/meminfo.
func (m *Manager) meminfoStats(st *Stats) error {
	kv, err := readKeyValues(filepath.Join(m.cfg.ProcRoot, "meminfo"), "MemTotal:", "MemFree:", "Inactive(file):", "AnonPages:")
	if err != nil {
		return err
	}
	const kB = 1024
	usage := (kv["MemTotal:"] - min(kv["MemFree:"], kv["MemTotal:"])) * kB
	st.MemoryUsageBytes = usage
	st.MemoryWorkingSetBytes = workingSet(usage, kv["Inactive(file):"]*kB)
	st.MemoryRSSBytes = kv["AnonPages:"] * kB
	return nil
}

// workingSet is usage minus inactive file pages, never below zero.
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile >= usage {
		return 0
	}
	return usage - inactiveFile
}

// cpuUsageV2 reads usage_usec from cpu.stat, in nanoseconds.
func cpuUsageV2(dir string) (uint64, error) {
	kv, err := readKeyValues(filepath.Join(dir, "cpu.stat"), "usage_usec")
	if err != nil {
		return 0, err
	}
	usec, ok := kv["usage_usec"]
	if !ok {
		return 0, fmt.Errorf("%s: no usage_usec", filepath.Join(dir, "cpu.stat"))
	}
	return usec * 1000, nil
}

// threadCount reads the kernel's number of threads from /proc/loadavg
// ("0.00 0.01 0.05 1/123 4567"), as sysinfo(2) reports procs.
func threadCount(procRoot string) (uint64, error) {
	raw, err := os.ReadFile(filepath.Join(procRoot, "loadavg"))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(raw))
	if len(fields) < 4 {
		return 0, fmt.Errorf("loadavg: unexpected %q", raw)
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, fmt.Errorf("loadavg: unexpected %q", raw)
	}
	return strconv.ParseUint(total, 10, 64)
}

// readUint reads a file holding one number; "max" reads as the largest.
func readUint(dir, file string) (uint64, error) {
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	raw, err := readSmall(filepath.Join(dir, file), *buf)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(raw))
	if s == "max" {
		return ^uint64(0), nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(dir, file), err)
	}
	return v, nil
}

// readKeyValues reads the given keys' values from "key value" lines
// (memory.stat, cpu.stat, meminfo, whose keys keep their colon); every key
// when none is given. Lines that do not parse are skipped.
func readKeyValues(path string, keys ...string) (map[string]uint64, error) {
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	raw, err := readSmall(path, *buf)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, max(len(keys), 8))
	for len(raw) > 0 && (len(keys) == 0 || len(out) < len(keys)) {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		key, value, ok := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
		if !ok || len(keys) > 0 && !slices.Contains(keys, string(key)) {
			continue
		}
		value = bytes.TrimSpace(value)
		if sp := bytes.IndexByte(value, ' '); sp >= 0 { // meminfo's " kB"
			value = value[:sp]
		}
		if v, err := strconv.ParseUint(string(value), 10, 64); err == nil {
			out[string(key)] = v
		}
	}
	return out, nil
}

// bufPool holds the buffers cgroup files are read into; they are small (memory.stat is under 2 KiB).
var bufPool = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// readSmall reads a small file (a cgroup or proc file) into buf with open, read and close alone: the stats
// read several thousand of them a minute, and os.ReadFile costs twice the system calls (stat, a poller
// registration, a last read). A file larger than buf is read whole into a new slice.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
	}
}
