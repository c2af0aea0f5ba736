package stats

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The container_* series of cAdvisor that dashboards read most, as upstream's kubelet serves them on
// /metrics/cadvisor: CPU, memory (working set, RSS, usage), network and the writable layer's usage, for each
// container, and for each pod (container="") with its network. name is the container's ID.
var (
	cadvisorLabels = []string{"container", "image", "name", "namespace", "pod"}
	netLabels      = append([]string{"interface"}, cadvisorLabels...)
	fsLabels       = append([]string{"device"}, cadvisorLabels...)

	cadvisorCPU     = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", cadvisorLabels, nil)
	cadvisorWS      = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set in bytes.", cadvisorLabels, nil)
	cadvisorRSS     = prometheus.NewDesc("container_memory_rss", "Size of RSS in bytes.", cadvisorLabels, nil)
	cadvisorUsage   = prometheus.NewDesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", cadvisorLabels, nil)
	cadvisorFaults  = prometheus.NewDesc("container_memory_failures_total", "Cumulative count of memory allocation failures.", append([]string{"failure_type", "scope"}, cadvisorLabels...), nil)
	cadvisorStart   = prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", cadvisorLabels, nil)
	cadvisorRx      = prometheus.NewDesc("container_network_receive_bytes_total", "Cumulative count of bytes received", netLabels, nil)
	cadvisorTx      = prometheus.NewDesc("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", netLabels, nil)
	cadvisorRxErr   = prometheus.NewDesc("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", netLabels, nil)
	cadvisorTxErr   = prometheus.NewDesc("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", netLabels, nil)
	cadvisorFsUsage = prometheus.NewDesc("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", fsLabels, nil)
	cadvisorFsInode = prometheus.NewDesc("container_fs_inodes_total", "Number of inodes used by the container on this filesystem.", fsLabels, nil)
	// cAdvisor's pressure series (cgroup v2), from the PSI totals in microseconds.
	cadvisorCPUStalled = prometheus.NewDesc("container_pressure_cpu_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to CPU congestion.", cadvisorLabels, nil)
	cadvisorCPUWaiting = prometheus.NewDesc("container_pressure_cpu_waiting_seconds_total", "Total time duration tasks in the container have waited due to CPU congestion.", cadvisorLabels, nil)
	cadvisorMemStalled = prometheus.NewDesc("container_pressure_memory_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to memory congestion.", cadvisorLabels, nil)
	cadvisorMemWaiting = prometheus.NewDesc("container_pressure_memory_waiting_seconds_total", "Total time duration tasks in the container have waited due to memory congestion.", cadvisorLabels, nil)
	cadvisorIOStalled  = prometheus.NewDesc("container_pressure_io_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to IO congestion.", cadvisorLabels, nil)
	cadvisorIOWaiting  = prometheus.NewDesc("container_pressure_io_waiting_seconds_total", "Total time duration tasks in the container have waited due to IO congestion.", cadvisorLabels, nil)
	machineCores       = prometheus.NewDesc("machine_cpu_cores", "Number of logical CPU cores.", nil, nil)
	machineMemory      = prometheus.NewDesc("machine_memory_bytes", "Amount of memory installed on the machine.", nil, nil)
)

// CadvisorCollector serves the last gathering as cAdvisor's container_* series (/metrics/cadvisor).
func (c *Collector) CadvisorCollector() prometheus.Collector { return cadvisorCollector{c} }

type cadvisorCollector struct{ c *Collector }

func (cc cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cadvisorCPU, cadvisorWS, cadvisorRSS, cadvisorUsage, cadvisorFaults, cadvisorStart,
		cadvisorRx, cadvisorTx, cadvisorRxErr, cadvisorTxErr, cadvisorFsUsage, cadvisorFsInode, machineCores, machineMemory,
		cadvisorCPUStalled, cadvisorCPUWaiting, cadvisorMemStalled, cadvisorMemWaiting, cadvisorIOStalled, cadvisorIOWaiting} {
		ch <- d
	}
}

func (cc cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(machineCores, prometheus.GaugeValue, float64(runtime.NumCPU()))
	if m := memTotal(cc.c.cfg.ProcRoot); m > 0 {
		ch <- prometheus.MustNewConstMetric(machineMemory, prometheus.GaugeValue, float64(m))
	}
	s := cc.c.last.Load()
	if s == nil {
		return
	}
	device := s.imageFsMount
	for i, p := range s.summary.Pods {
		info := s.pods[i]
		pod := []string{"", "", "", p.PodRef.Namespace, p.PodRef.Name}
		usage(ch, p.CPU, p.Memory, p.IO, pod)
		if n := p.Network; n != nil {
			for _, is := range n.Interfaces {
				l := append([]string{is.Name}, pod...)
				counter(ch, cadvisorRx, is.RxBytes, n.Time.Time, l)
				counter(ch, cadvisorTx, is.TxBytes, n.Time.Time, l)
				counter(ch, cadvisorRxErr, is.RxErrors, n.Time.Time, l)
				counter(ch, cadvisorTxErr, is.TxErrors, n.Time.Time, l)
			}
		}
		for _, ctr := range p.Containers {
			var image, id string
			for _, c := range info.Containers {
				if c.Name == ctr.Name {
					image, id = c.Image, c.ID
				}
			}
			l := []string{ctr.Name, image, id, p.PodRef.Namespace, p.PodRef.Name}
			usage(ch, ctr.CPU, ctr.Memory, ctr.IO, l)
			if !ctr.StartTime.IsZero() {
				ch <- prometheus.MustNewConstMetric(cadvisorStart, prometheus.GaugeValue, float64(ctr.StartTime.UnixNano())/1e9, l...)
			}
			if fs := ctr.Rootfs; fs != nil && fs.UsedBytes != nil {
				fl := append([]string{device}, l...)
				at(ch, fs.Time.Time, prometheus.MustNewConstMetric(cadvisorFsUsage, prometheus.GaugeValue, float64(*fs.UsedBytes), fl...))
				if fs.InodesUsed != nil {
					at(ch, fs.Time.Time, prometheus.MustNewConstMetric(cadvisorFsInode, prometheus.GaugeValue, float64(*fs.InodesUsed), fl...))
				}
			}
		}
	}
}

// usage writes a cgroup's CPU, memory and pressure series.
func usage(ch chan<- prometheus.Metric, c *statsapi.CPUStats, m *statsapi.MemoryStats, io *statsapi.IOStats, l []string) {
	if c != nil && c.UsageCoreNanoSeconds != nil {
		at(ch, c.Time.Time, prometheus.MustNewConstMetric(cadvisorCPU, prometheus.CounterValue, float64(*c.UsageCoreNanoSeconds)/1e9, l...))
	}
	if c != nil {
		pressure(ch, c.PSI, c.Time.Time, cadvisorCPUStalled, cadvisorCPUWaiting, l)
	}
	if io != nil {
		pressure(ch, io.PSI, io.Time.Time, cadvisorIOStalled, cadvisorIOWaiting, l)
	}
	if m == nil {
		return
	}
	pressure(ch, m.PSI, m.Time.Time, cadvisorMemStalled, cadvisorMemWaiting, l)
	for _, g := range []struct {
		d *prometheus.Desc
		v *uint64
	}{{cadvisorWS, m.WorkingSetBytes}, {cadvisorRSS, m.RSSBytes}, {cadvisorUsage, m.UsageBytes}} {
		if g.v != nil {
			at(ch, m.Time.Time, prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, float64(*g.v), l...))
		}
	}
	for _, f := range []struct {
		typ string
		v   *uint64
	}{{"pgfault", m.PageFaults}, {"pgmajfault", m.MajorPageFaults}} {
		if f.v != nil {
			at(ch, m.Time.Time, prometheus.MustNewConstMetric(cadvisorFaults, prometheus.CounterValue, float64(*f.v),
				append([]string{f.typ, "container"}, l...)...))
		}
	}
}

// pressure writes a resource's stalled (full) and waiting (some) totals in seconds, as cAdvisor does.
func pressure(ch chan<- prometheus.Metric, p *statsapi.PSIStats, t time.Time, stalled, waiting *prometheus.Desc, l []string) {
	if p == nil {
		return
	}
	at(ch, t, prometheus.MustNewConstMetric(stalled, prometheus.CounterValue, float64(p.Full.Total)/1e6, l...))
	at(ch, t, prometheus.MustNewConstMetric(waiting, prometheus.CounterValue, float64(p.Some.Total)/1e6, l...))
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v *uint64, t time.Time, l []string) {
	if v != nil {
		at(ch, t, prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(*v), l...))
	}
}
