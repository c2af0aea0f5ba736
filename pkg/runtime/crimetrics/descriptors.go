package crimetrics

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

var (
	baseKeys    = []string{"pod", "namespace", "container", "id", "image"}
	networkKeys = with(baseKeys, "interface")
	diskKeys    = with(baseKeys, "device")
	failureKeys = with(baseKeys, "failure_type", "scope")
	blkioKeys   = with(diskKeys, "major", "minor", "operation")
)

func with(keys []string, more ...string) []string {
	return append(append([]string(nil), keys...), more...)
}

// series is one descriptor and the type of its values.
type series struct {
	name, help string
	keys       []string
	typ        runtimeapi.MetricType
}

const (
	counter = runtimeapi.MetricType_COUNTER
	gauge   = runtimeapi.MetricType_GAUGE
)

// all are the series this runtime reports, in containerd's order and words.
var all = []series{
	{"container_cpu_user_seconds_total", "Cumulative user CPU time consumed in seconds.", baseKeys, counter},
	{"container_cpu_system_seconds_total", "Cumulative system CPU time consumed in seconds.", baseKeys, counter},
	{"container_cpu_usage_seconds_total", "Cumulative CPU time consumed in seconds.", baseKeys, counter},
	{"container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", baseKeys, counter},
	{"container_cpu_cfs_throttled_periods_total", "Number of CPU throttled period intervals.", baseKeys, counter},
	{"container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", baseKeys, counter},
	{"container_memory_cache", "Number of bytes of memory used by the container for caching purposes.", baseKeys, gauge},
	{"container_memory_rss", "Size of RSS in bytes, total anonymous memory and swap cache memory used by the container.", baseKeys, gauge},
	{"container_memory_kernel_usage", "Size of kernel memory allocated to the container in bytes, includes page tables, socket buffers...", baseKeys, gauge},
	{"container_memory_mapped_file", "Size of container's memory mapped files in bytes.", baseKeys, gauge},
	{"container_memory_swap", "Container swap usage in bytes.", baseKeys, gauge},
	{"container_memory_failcnt", "Number of times container memory usage has hit its cgroup v1 upper memory limit, for cg2 this value is not currently supported", baseKeys, counter},
	{"container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", baseKeys, gauge},
	{"container_memory_max_usage_bytes", "Maximum container memory usage recorded in bytes", baseKeys, gauge},
	{"container_memory_working_set_bytes", "Amount of memory that is actively used by the container, excluding cached memory.", baseKeys, gauge},
	{"container_memory_total_active_file_bytes", "Current total active file in bytes.", baseKeys, gauge},
	{"container_memory_total_inactive_file_bytes", "Current total inactive file in bytes.", baseKeys, gauge},
	{"container_memory_failures_total", "Cumulative count of memory allocation failures.", failureKeys, counter},
	{"container_oom_events_total", "Count of out of memory events observed for the container", baseKeys, counter},
	{"container_fs_inodes_free", "Number of available Inodes", diskKeys, gauge},
	{"container_fs_inodes_total", "Number of Inodes", diskKeys, gauge},
	{"container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.", diskKeys, gauge},
	{"container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", diskKeys, gauge},
	{"container_fs_reads_bytes_total", "Cumulative count of bytes read", diskKeys, counter},
	{"container_fs_reads_total", "Cumulative count of reads completed", diskKeys, counter},
	{"container_fs_writes_bytes_total", "Cumulative count of bytes written", diskKeys, counter},
	{"container_fs_writes_total", "Cumulative count of writes completed", diskKeys, counter},
	{"container_blkio_device_usage_total", "Blkio device bytes usage", blkioKeys, counter},
	{"container_network_receive_bytes_total", "Cumulative count of bytes received", networkKeys, counter},
	{"container_network_receive_packets_total", "Cumulative count of packets received", networkKeys, counter},
	{"container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving", networkKeys, counter},
	{"container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", networkKeys, counter},
	{"container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", networkKeys, counter},
	{"container_network_transmit_packets_total", "Cumulative count of packets transmitted", networkKeys, counter},
	{"container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting", networkKeys, counter},
	{"container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", networkKeys, counter},
	{"container_processes", "Number of processes running inside the container", baseKeys, gauge},
	{"container_file_descriptors", "Number of open file descriptors for the container", baseKeys, gauge},
	{"container_sockets", "Number of open sockets for the container", baseKeys, gauge},
	{"container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero", baseKeys, gauge},
	{"container_threads", "Number of threads running inside the container", baseKeys, gauge},
	{"container_last_seen", "Last time a container was seen by the exporter", baseKeys, gauge},
	{"container_start_time_seconds", "Start time of the container since unix epoch in seconds", baseKeys, gauge},
	{"container_spec_cpu_period", "CPU period of the container", baseKeys, gauge},
	{"container_spec_cpu_shares", "CPU share of the container", baseKeys, gauge},
	{"container_spec_memory_limit_bytes", "Memory limit for the container", baseKeys, gauge},
	{"container_spec_memory_swap_limit_bytes", "Memory swap limit for the container", baseKeys, gauge},
}

// Descriptors are the series ListPodSandboxMetrics reports.
func Descriptors() []*runtimeapi.MetricDescriptor {
	out := make([]*runtimeapi.MetricDescriptor, len(all))
	for i, s := range all {
		out[i] = &runtimeapi.MetricDescriptor{Name: s.name, Help: s.help, LabelKeys: s.keys}
	}
	return out
}

var byName = func() map[string]series {
	m := make(map[string]series, len(all))
	for _, s := range all {
		m[s.name] = s
	}
	return m
}()
