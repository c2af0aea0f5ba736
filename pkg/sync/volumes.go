package podsync

import (
	"context"
	"fmt"
	"maps"
	"slices"

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

// pendingMount is one MountPod of a sync. A pod that has no sandbox yet mounts its volumes while the sandbox
// and its network are created (about a second in a burst), since only the containers need them: the token
// request and the object reads then cost a pod nothing on its way to Ready. The price, unlike upstream, is
// a sandbox (and an IP) for a pod whose volumes cannot be set up; its containers still wait, and the pod stays
// ContainerCreating with its FailedMount event. A pod that has a sandbox mounts first, as upstream does.
type pendingMount struct {
	done    chan struct{}
	volumes map[string]volume.Mounted
	err     error
}

// mountVolumes runs MountPod for pod, beside the caller when background is set.
func (k *Kubelet) mountVolumes(ctx context.Context, pod *v1.Pod, background bool) *pendingMount {
	m := &pendingMount{done: make(chan struct{})}
	run := func() {
		defer close(m.done)
		t0 := k.clock.Now()
		m.volumes, m.err = k.volumes.MountPod(ctx, pod)
		k.debug.mountResult(pod.UID, m.err)
		if m.err == nil {
			k.debug.step(pod.UID, "volumes", fmt.Sprintf("%d volumes", len(m.volumes)), t0, k.clock.Now())
		}
		// Each call to the driver of a volume set up (a CSI volume's stage and publish), with its time: the
		// timeline shows which driver was slow.
		for _, name := range slices.Sorted(maps.Keys(m.volumes)) {
			for _, c := range m.volumes[name].Calls {
				k.debug.step(pod.UID, "volume "+name+": "+c.Name, "", c.Start, c.Start.Add(c.Took))
			}
		}
	}
	if background {
		go run()
	} else {
		run()
	}
	return m
}

// wait returns MountPod's result once it is there.
func (m *pendingMount) wait() (map[string]volume.Mounted, error) {
	<-m.done
	return m.volumes, m.err
}
