package stats

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The volume series of /metrics, named and described as upstream's kubelet serves them: one per claim the
// node's pods mount whose volume reports its capacity (CSI volumes, from their drivers), from the last
// gathering. Monitoring's "PVC almost full" alerts read these.
var (
	volumeLabels        = []string{"namespace", "persistentvolumeclaim"}
	volumeCapacityDesc  = prometheus.NewDesc("kubelet_volume_stats_capacity_bytes", "[ALPHA] Capacity in bytes of the volume", volumeLabels, nil)
	volumeAvailableDesc = prometheus.NewDesc("kubelet_volume_stats_available_bytes", "[ALPHA] Number of available bytes in the volume", volumeLabels, nil)
	volumeUsedDesc      = prometheus.NewDesc("kubelet_volume_stats_used_bytes", "[ALPHA] Number of used bytes in the volume", volumeLabels, nil)
	volumeInodesDesc    = prometheus.NewDesc("kubelet_volume_stats_inodes", "[ALPHA] Maximum number of inodes in the volume", volumeLabels, nil)
	volumeInodesFree    = prometheus.NewDesc("kubelet_volume_stats_inodes_free", "[ALPHA] Number of free inodes in the volume", volumeLabels, nil)
	volumeInodesUsed    = prometheus.NewDesc("kubelet_volume_stats_inodes_used", "[ALPHA] Number of used inodes in the volume", volumeLabels, nil)
	volumeAbnormalDesc  = prometheus.NewDesc("kubelet_volume_stats_health_status_abnormal",
		"[ALPHA] Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume is unhealthy, 0 indicates volume is healthy",
		volumeLabels, nil)
)

// VolumeCollector serves the claims' volume stats of the last gathering as upstream's kubelet_volume_stats_*.
func (c *Collector) VolumeCollector() prometheus.Collector { return volumeCollector{c} }

type volumeCollector struct{ c *Collector }

func (v volumeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{volumeCapacityDesc, volumeAvailableDesc, volumeUsedDesc, volumeInodesDesc,
		volumeInodesFree, volumeInodesUsed, volumeAbnormalDesc} {
		ch <- d
	}
}

func (v volumeCollector) Collect(ch chan<- prometheus.Metric) {
	s := v.c.last.Load()
	if s == nil {
		return
	}
	seen := map[[2]string]bool{}
	for _, p := range s.summary.Pods {
		for _, vs := range p.VolumeStats {
			if vs.PVCRef == nil || vs.CapacityBytes == nil {
				continue
			}
			key := [2]string{vs.PVCRef.Namespace, vs.PVCRef.Name}
			if seen[key] { // a claim two pods mount is one volume
				continue
			}
			seen[key] = true
			gauge := func(d *prometheus.Desc, val *uint64) {
				if val != nil {
					ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*val), key[0], key[1])
				}
			}
			gauge(volumeCapacityDesc, vs.CapacityBytes)
			gauge(volumeAvailableDesc, vs.AvailableBytes)
			gauge(volumeUsedDesc, vs.UsedBytes)
			gauge(volumeInodesDesc, vs.Inodes)
			gauge(volumeInodesFree, vs.InodesFree)
			gauge(volumeInodesUsed, vs.InodesUsed)
			// Only for a volume whose driver reports its health (upstream's CSIVolumeHealth).
			if h := vs.VolumeHealthStats; h != nil {
				abnormal := 0.0
				if h.Abnormal {
					abnormal = 1
				}
				ch <- prometheus.MustNewConstMetric(volumeAbnormalDesc, prometheus.GaugeValue, abnormal, key[0], key[1])
			}
		}
	}
}
