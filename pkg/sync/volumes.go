package podsync

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/volume"
)

// PodVolumes prepares the volumes of a pod on the host. pkg/volume's Manager is the node's.
type PodVolumes interface {
	// MountPod makes the pod's volumes ready and returns them by volume name. Volumes it cannot provide
	// are left out of the map, and the error says why (a volume.SetupError per volume).
	MountPod(ctx context.Context, pod *v1.Pod) (map[string]volume.Mounted, error)
	// UnmountPod releases what MountPod set up for the pod.
	UnmountPod(ctx context.Context, uid types.UID) error
}

var _ PodVolumes = (*volume.Manager)(nil)
