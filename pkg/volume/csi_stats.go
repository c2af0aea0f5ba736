package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/types"
)

// VolumeStats is a volume's filesystem as its CSI driver reports it (NodeGetVolumeStats).
type VolumeStats struct {
	Used, Capacity, Available           int64
	Inodes, InodesUsed, InodesAvailable int64
	// Abnormal, when set, is the volume's health as its driver reports it (NodeGetVolumeHealth, with
	// Config.VolumeHealth): true with Message when the driver reports a problem.
	Abnormal *bool
	Message  string
}

// csiStatsTimeout bounds one NodeGetVolumeStats call: stats are gathered for every volume each minute, and a
// slow driver must not hold the gathering.
const csiStatsTimeout = 10 * time.Second

// CSIVolumeStats asks the drivers of the pod's published CSI volumes that offer GET_VOLUME_STATS for their
// usage, by the pod's volume name. A volume whose driver is not registered, does not offer stats or fails is
// left out (the error joins the failures).
func (m *Manager) CSIVolumeStats(ctx context.Context, uid types.UID) (map[string]VolumeStats, error) {
	base := filepath.Join(m.PodDir(uid), "volumes", pluginCSI)
	entries, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]VolumeStats{}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(base, e.Name())
		data, err := readVolData(filepath.Join(dir, volDataFile))
		if err != nil || data.PodVolume == "" {
			continue
		}
		target := data.target(dir)
		if !m.cfg.Mounter.IsMountPoint(target) {
			continue
		}
		drv, err := m.driver(data.DriverName)
		if err != nil || !drv.Stats {
			continue
		}
		req := &csispec.NodeGetVolumeStatsRequest{VolumeId: data.VolumeHandle, VolumePath: target}
		if drv.StageUnstage && data.LifecycleMode != "Ephemeral" {
			req.StagingTargetPath = m.stagingPath(data)
		}
		cctx, cancel := context.WithTimeout(ctx, csiStatsTimeout)
		resp, err := drv.Node.NodeGetVolumeStats(cctx, req)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var st VolumeStats
		for _, u := range resp.GetUsage() {
			switch u.GetUnit() {
			case csispec.VolumeUsage_BYTES:
				st.Used, st.Capacity, st.Available = u.GetUsed(), u.GetTotal(), u.GetAvailable()
			case csispec.VolumeUsage_INODES:
				st.InodesUsed, st.Inodes, st.InodesAvailable = u.GetUsed(), u.GetTotal(), u.GetAvailable()
			}
		}
		if m.cfg.VolumeHealth && drv.Health {
			cctx, cancel := context.WithTimeout(ctx, csiStatsTimeout)
			h, err := drv.Node.NodeGetVolumeHealth(cctx, &csispec.NodeGetVolumeHealthRequest{VolumeId: data.VolumeHandle,
				VolumePublishPath: target, StagingTargetPath: req.StagingTargetPath})
			cancel()
			if err != nil {
				errs = append(errs, err)
			} else {
				abnormal, msg := volumeHealth(h.GetVolumeHealth())
				st.Abnormal, st.Message = &abnormal, msg
			}
		}
		out[data.PodVolume] = st
	}
	return out, errors.Join(errs...)
}

// volumeHealth reads a driver's health report of a volume: abnormal when it lists any problem, with the
// problems' messages (their reasons when they have none).
func volumeHealth(h *csispec.VolumeHealth) (abnormal bool, message string) {
	var msgs []string
	for _, e := range h.GetHealthStatuses() {
		if e == nil {
			continue
		}
		abnormal = true
		switch {
		case e.GetMessage() != "":
			msgs = append(msgs, e.GetMessage())
		case e.GetReason() != "":
			msgs = append(msgs, e.GetReason())
		default:
			msgs = append(msgs, e.GetStatus().String())
		}
	}
	return abnormal, strings.Join(msgs, "; ")
}
