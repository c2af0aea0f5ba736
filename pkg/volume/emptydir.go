package volume

import (
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// setUpEmptyDir makes an emptyDir volume: a directory on the node's disk, or a tmpfs for medium Memory,
// sized as upstream sizes it (memoryVolumeSize). A volume already set up (a restarted kubelet adopting its
// pod) is kept as it is, contents included.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, vol *v1.Volume) (string, error) {
	dir := m.volumeDir(pod.UID, pluginEmptyDir, vol.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	switch vol.EmptyDir.Medium {
	case v1.StorageMediumDefault:
	case v1.StorageMediumMemory:
		if !m.cfg.Mounter.IsMountPoint(dir) {
			if err := m.cfg.Mounter.MountTmpfs(dir, memoryVolumeSize(pod, vol.EmptyDir.SizeLimit, m.cfg.Node().Allocatable)); err != nil {
				return "", fmt.Errorf("mount tmpfs: %w", err)
			}
		}
	default:
		return "", fmt.Errorf("emptyDir medium %q is not supported on this node (it has no huge pages configured)", vol.EmptyDir.Medium)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return "", err
	}
	if g := podFSGroup(pod); g != nil {
		if err := os.Chown(dir, -1, int(*g)); err != nil {
			return "", err
		}
		if err := os.Chmod(dir, 0o777|os.ModeSetgid); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// memoryVolumeSize is the size of a memory-backed volume, as upstream's emptyDir sizes it: the node's
// allocatable memory, or the memory limit of the pod's cgroup (podfacts.PodMemoryLimit) when it has one and
// it is smaller, or sizeLimit when it is set and smaller still. 0 when none is known (the kernel's default).
func memoryVolumeSize(pod *v1.Pod, sizeLimit *resource.Quantity, allocatable v1.ResourceList) int64 {
	size := int64(0)
	if q, ok := allocatable[v1.ResourceMemory]; ok {
		size = podfacts.Value(q)
	}
	if lim := podfacts.PodMemoryLimit(pod); lim > 0 && (size == 0 || lim <= size) {
		size = lim
	}
	if sizeLimit != nil {
		if l := podfacts.Value(*sizeLimit); l > 0 && (size == 0 || l <= size) {
			size = l
		}
	}
	return size
}
