package crimetrics

import (
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels name the series' subject: the pod (name and namespace), the container (its name; "" for the pod
// itself), its ID (the container's, or the sandbox's) and its image ("" for the pod).
type Labels struct {
	Pod, Namespace, Container, ID, Image string
}

func (l Labels) values(more ...string) []string {
	return with([]string{l.Pod, l.Namespace, l.Container, l.ID, l.Image}, more...)
}

// CPU is a cgroup's CPU time, in nanoseconds, and its CFS throttling.
type CPU struct {
	Total, User, System                       uint64
	Periods, ThrottledPeriods, ThrottledNanos uint64
}

// Memory is a cgroup's memory, in bytes, and its counters.
type Memory struct {
	Cache, RSS, Kernel, MappedFile, Swap, Usage, MaxUsage, WorkingSet, ActiveFile, InactiveFile uint64
	Failcnt, PgFault, PgMajFault, OOMEvents                                                     uint64
}

// BlockIO is what a cgroup read from and wrote to one device.
type BlockIO struct {
	Device                               string
	Major, Minor                         uint64
	ReadBytes, WriteBytes, Reads, Writes uint64
}

// Filesystem is the container's writable layer on the runtime's filesystem.
type Filesystem struct {
	Device                                string
	Usage, Limit, InodesTotal, InodesFree uint64
}

// Processes are the container's processes, threads and open files.
type Processes struct {
	Processes, Threads, ThreadsMax, FileDescriptors, Sockets uint64
}

// Spec is the container's resources as set.
type Spec struct {
	CPUPeriod, CPUShares, MemoryLimit, MemorySwapLimit uint64
}

// Sample is one container's values at Timestamp (Unix nanoseconds).
type Sample struct {
	Labels    Labels
	Timestamp int64
	StartedAt int64 // Unix nanoseconds
	CPU       CPU
	Memory    Memory
	BlockIO   []BlockIO
	FS        Filesystem
	Processes Processes
	Spec      Spec
}

// Network is a network interface's counters.
type Network struct {
	Interface                               string
	RxBytes, RxPackets, RxDropped, RxErrors uint64
	TxBytes, TxPackets, TxDropped, TxErrors uint64
}

type builder struct {
	ts  int64
	out []*runtimeapi.Metric
}

func (b *builder) add(name string, labels []string, v uint64) {
	s, ok := byName[name]
	if !ok || len(labels) != len(s.keys) {
		return // not a series of Descriptors; the package's tests keep every call one
	}
	b.out = append(b.out, &runtimeapi.Metric{Name: name, Timestamp: b.ts, MetricType: s.typ, LabelValues: labels,
		Value: &runtimeapi.UInt64Value{Value: v}})
}

const second = 1_000_000_000

// ContainerMetrics are a container's series.
func ContainerMetrics(s Sample) *runtimeapi.ContainerMetrics {
	b := &builder{ts: s.Timestamp}
	l := s.Labels.values()
	c, m, p := s.CPU, s.Memory, s.Processes
	for _, v := range []struct {
		name string
		v    uint64
	}{
		{"container_cpu_user_seconds_total", c.User / second},
		{"container_cpu_system_seconds_total", c.System / second},
		{"container_cpu_usage_seconds_total", c.Total / second},
		{"container_cpu_cfs_periods_total", c.Periods},
		{"container_cpu_cfs_throttled_periods_total", c.ThrottledPeriods},
		{"container_cpu_cfs_throttled_seconds_total", c.ThrottledNanos / second},
		{"container_memory_cache", m.Cache},
		{"container_memory_rss", m.RSS},
		{"container_memory_kernel_usage", m.Kernel},
		{"container_memory_mapped_file", m.MappedFile},
		{"container_memory_swap", m.Swap},
		{"container_memory_failcnt", m.Failcnt},
		{"container_memory_usage_bytes", m.Usage},
		{"container_memory_max_usage_bytes", m.MaxUsage},
		{"container_memory_working_set_bytes", m.WorkingSet},
		{"container_memory_total_active_file_bytes", m.ActiveFile},
		{"container_memory_total_inactive_file_bytes", m.InactiveFile},
		{"container_oom_events_total", m.OOMEvents},
		{"container_processes", p.Processes},
		{"container_file_descriptors", p.FileDescriptors},
		{"container_sockets", p.Sockets},
		{"container_threads_max", p.ThreadsMax},
		{"container_threads", p.Threads},
		{"container_last_seen", uint64(s.Timestamp / second)},
		{"container_start_time_seconds", uint64(s.StartedAt / second)},
		{"container_spec_cpu_period", s.Spec.CPUPeriod},
		{"container_spec_cpu_shares", s.Spec.CPUShares},
		{"container_spec_memory_limit_bytes", s.Spec.MemoryLimit},
		{"container_spec_memory_swap_limit_bytes", s.Spec.MemorySwapLimit},
	} {
		b.add(v.name, l, v.v)
	}
	// cAdvisor's failure types and scopes: page faults (pgfault) and major ones (pgmajfault), of the
	// container's cgroup alone and with its children (the same here: a container's cgroup has none).
	for _, scope := range []string{"container", "hierarchy"} {
		b.add("container_memory_failures_total", s.Labels.values("pgfault", scope), m.PgFault)
		b.add("container_memory_failures_total", s.Labels.values("pgmajfault", scope), m.PgMajFault)
	}
	fs := s.FS
	dl := s.Labels.values(fs.Device)
	b.add("container_fs_usage_bytes", dl, fs.Usage)
	b.add("container_fs_limit_bytes", dl, fs.Limit)
	b.add("container_fs_inodes_total", dl, fs.InodesTotal)
	b.add("container_fs_inodes_free", dl, fs.InodesFree)
	for _, io := range s.BlockIO {
		dl := s.Labels.values(io.Device)
		b.add("container_fs_reads_bytes_total", dl, io.ReadBytes)
		b.add("container_fs_reads_total", dl, io.Reads)
		b.add("container_fs_writes_bytes_total", dl, io.WriteBytes)
		b.add("container_fs_writes_total", dl, io.Writes)
		major, minor := fmt.Sprint(io.Major), fmt.Sprint(io.Minor)
		b.add("container_blkio_device_usage_total", s.Labels.values(io.Device, major, minor, "Read"), io.ReadBytes)
		b.add("container_blkio_device_usage_total", s.Labels.values(io.Device, major, minor, "Write"), io.WriteBytes)
	}
	return &runtimeapi.ContainerMetrics{ContainerId: s.Labels.ID, Metrics: b.out}
}

// SandboxMetrics are the pod's own series (its network interfaces', as containerd reports them, with the
// container and image labels empty), with its containers' beside them.
func SandboxMetrics(l Labels, ts int64, nets []Network, containers []*runtimeapi.ContainerMetrics) *runtimeapi.PodSandboxMetrics {
	b := &builder{ts: ts}
	for _, n := range nets {
		nl := l.values(n.Interface)
		b.add("container_network_receive_bytes_total", nl, n.RxBytes)
		b.add("container_network_receive_packets_total", nl, n.RxPackets)
		b.add("container_network_receive_packets_dropped_total", nl, n.RxDropped)
		b.add("container_network_receive_errors_total", nl, n.RxErrors)
		b.add("container_network_transmit_bytes_total", nl, n.TxBytes)
		b.add("container_network_transmit_packets_total", nl, n.TxPackets)
		b.add("container_network_transmit_packets_dropped_total", nl, n.TxDropped)
		b.add("container_network_transmit_errors_total", nl, n.TxErrors)
	}
	return &runtimeapi.PodSandboxMetrics{PodSandboxId: l.ID, Metrics: b.out, ContainerMetrics: containers}
}
