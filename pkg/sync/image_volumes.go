package podsync

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podspec"
	"github.com/nodeagent/kubelet/pkg/status"
)

// imageVolume is the pull of one image volume (volumes[].image) for a sync: the image reference the
// runtime mounts, or why the containers that mount it cannot start yet.
type imageVolume struct {
	ref       string
	userImage string // the reference as the pod wrote it
	waiting   *status.Waiting
	retry     time.Duration
}

// pullImageVolumes pulls the image of every image volume of the pod, by its pull policy and with the pod's
// credentials, as upstream's kubelet does once the sandbox is there and before any container starts. A
// failed pull keeps only the containers that mount that volume from starting (ErrImagePull, then
// ImagePullBackOff), with the pull's message.
func (k *Kubelet) pullImageVolumes(ctx context.Context, pod *v1.Pod, sandbox *runtimeapi.PodSandboxConfig) map[string]imageVolume {
	var out map[string]imageVolume
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Image == nil {
			continue
		}
		if out == nil {
			out = map[string]imageVolume{}
		}
		ref, waiting, retry := k.puller.ensureVolumeImage(ctx, pod, vol.Image, sandbox)
		out[vol.Name] = imageVolume{ref: ref, userImage: vol.Image.Reference, waiting: waiting, retry: retry}
	}
	return out
}

// imageVolumeWaiting is why container c cannot start for an image volume it mounts whose pull failed (the
// last one in its mounts' order, as upstream reports it), and when to try again; nil when none failed.
func imageVolumeWaiting(c *v1.Container, pulls map[string]imageVolume) (*status.Waiting, time.Duration) {
	var last *status.Waiting
	var retry time.Duration
	for _, m := range c.VolumeMounts {
		if p, ok := pulls[m.Name]; ok && p.waiting != nil {
			last, retry = p.waiting, p.retry
		}
	}
	return last, retry
}

// imageMount is the CRI mount of an image volume: the runtime mounts the pulled image (its subPath only,
// when one is given) read-only at the mount path.
func imageMount(m *v1.VolumeMount, subPath string, pull imageVolume) (*runtimeapi.Mount, error) {
	if pull.ref == "" {
		return nil, fmt.Errorf("image volume %q has not been pulled", m.Name)
	}
	return &runtimeapi.Mount{
		ContainerPath: m.MountPath,
		Image:         &runtimeapi.ImageSpec{Image: pull.ref, UserSpecifiedImage: pull.userImage},
		ImageSubPath:  subPath,
		Readonly:      true,
		Propagation:   podspec.Propagation(m.MountPropagation),
	}, nil
}

// VolumeImages names the images of the image volumes of every pod the kubelet knows, normalized as pulled
// (`docker.io/library/data:1`, or the digest reference as written): the image garbage collector counts them
// in use, as it counts the images of containers.
func (k *Kubelet) VolumeImages() []string {
	var out []string
	for _, p := range k.pods.all() {
		for _, v := range p.Spec.Volumes {
			if v.Image == nil {
				continue
			}
			if ref, err := normalizeImage(v.Image.Reference); err == nil {
				out = append(out, ref)
			}
		}
	}
	return out
}
