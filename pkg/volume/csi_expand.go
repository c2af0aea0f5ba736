package volume

import (
	"context"
	"encoding/json"
	"fmt"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// needsNodeExpansion says whether the claim's volume was expanded by its controller and waits for the node
// (upstream's resize status NodeResizePending, or NodeResizeInProgress when a kubelet stopped half way), and
// to what size: the PersistentVolume's capacity, when it is above the claim's.
func needsNodeExpansion(pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) (resource.Quantity, bool) {
	if pvc == nil || pv == nil {
		return resource.Quantity{}, false
	}
	switch pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] {
	case v1.PersistentVolumeClaimNodeResizePending, v1.PersistentVolumeClaimNodeResizeInProgress:
	default:
		return resource.Quantity{}, false
	}
	size, ok := pv.Spec.Capacity[v1.ResourceStorage]
	if !ok {
		return resource.Quantity{}, false
	}
	return size, true
}

// expandCSI finishes a volume expansion on the node, as upstream's NodeExpander does: it marks the claim's
// resize in progress, asks the driver (NodeExpandVolume, when it offers EXPAND_VOLUME) to grow the published
// volume to size, and records the claim's new capacity with its resize status cleared.
func (m *Manager) expandCSI(ctx context.Context, v csiVolume, data volData, target string, size resource.Quantity) error {
	pvc := v.claim
	if pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] != v1.PersistentVolumeClaimNodeResizeInProgress {
		if err := m.patchClaimStatus(ctx, pvc, map[string]any{"allocatedResourceStatuses": map[string]any{
			string(v1.ResourceStorage): string(v1.PersistentVolumeClaimNodeResizeInProgress)}}); err != nil {
			return fmt.Errorf("MountVolume.NodeExpandVolume failed to mark node expansion in progress: %w", err)
		}
	}
	drv, err := m.driver(v.driver)
	if err != nil {
		return err
	}
	if drv.Expand {
		req := &csispec.NodeExpandVolumeRequest{VolumeId: v.handle, VolumePath: target, VolumeCapability: v.capability(drv.SingleNodeMultiWriter),
			CapacityRange: &csispec.CapacityRange{RequiredBytes: size.Value()}}
		if drv.StageUnstage && !v.ephemeral {
			req.StagingTargetPath = m.stagingPath(data)
		}
		cctx, cancel := context.WithTimeout(ctx, csiTimeout)
		_, err := drv.Node.NodeExpandVolume(cctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("MountVolume.NodeExpandVolume failed for volume %q: %w", v.specName, err)
		}
	}
	// Upstream's MarkFSResizeFinished: the new capacity, no resize status, no FileSystemResizePending.
	var conditions []v1.PersistentVolumeClaimCondition
	for _, c := range pvc.Status.Conditions {
		if c.Type != v1.PersistentVolumeClaimFileSystemResizePending && c.Type != v1.PersistentVolumeClaimResizing {
			conditions = append(conditions, c)
		}
	}
	if err := m.patchClaimStatus(ctx, pvc, map[string]any{
		"capacity":                  map[string]any{string(v1.ResourceStorage): size.String()},
		"allocatedResourceStatuses": map[string]any{string(v1.ResourceStorage): nil},
		"conditions":                conditions,
	}); err != nil {
		return fmt.Errorf("MountVolume.NodeExpandVolume: record the claim's new capacity: %w", err)
	}
	klog.FromContext(ctx).Info("Expanded CSI volume on the node", "claim", klog.KObj(pvc), "driver", v.driver, "size", size.String())
	return nil
}

func (m *Manager) patchClaimStatus(ctx context.Context, pvc *v1.PersistentVolumeClaim, status map[string]any) error {
	if m.cfg.ClaimStatus == nil {
		return fmt.Errorf("no API server to record claim %s/%s's status in", pvc.Namespace, pvc.Name)
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	return m.cfg.ClaimStatus.PatchClaimStatus(ctx, pvc.Namespace, pvc.Name, patch)
}
