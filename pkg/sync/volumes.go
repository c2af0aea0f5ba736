package podsync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// PodVolumes prepares the volumes of a pod on the host.
type PodVolumes interface {
	// MountPod makes the pod's volumes ready and returns their host paths by volume name. Volumes it cannot
	// provide are left out of the map.
	MountPod(ctx context.Context, pod *v1.Pod) (map[string]string, error)
	// UnmountPod releases what MountPod set up for the pod.
	UnmountPod(ctx context.Context, uid types.UID) error
}

// dirVolumes is the built-in PodVolumes: emptyDir as a directory under the pod directory and hostPath as
// given. Other volume types are left out (with a log line).
type dirVolumes struct {
	podDir func(types.UID) string
}

var _ PodVolumes = dirVolumes{}

func (d dirVolumes) MountPod(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	out := map[string]string{}
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.EmptyDir != nil:
			p := filepath.Join(d.podDir(pod.UID), "volumes", "kubernetes.io~empty-dir", vol.Name)
			if err := os.MkdirAll(p, 0o777); err != nil {
				return nil, fmt.Errorf("create emptyDir %q: %w", vol.Name, err)
			}
			if err := os.Chmod(p, 0o777); err != nil {
				return nil, fmt.Errorf("chmod emptyDir %q: %w", vol.Name, err)
			}
			out[vol.Name] = p
		case vol.HostPath != nil:
			p := filepath.Clean(vol.HostPath.Path)
			if err := ensureHostPath(p, vol.HostPath.Type); err != nil {
				return nil, fmt.Errorf("hostPath %q: %w", vol.Name, err)
			}
			out[vol.Name] = p
		default:
			klog.FromContext(ctx).V(2).Info("Volume type not provided by the built-in volume manager", "pod", klog.KObj(pod), "volume", vol.Name)
		}
	}
	return out, nil
}

func (d dirVolumes) UnmountPod(context.Context, types.UID) error { return nil }

func ensureHostPath(p string, t *v1.HostPathType) error {
	typ := v1.HostPathUnset
	if t != nil {
		typ = *t
	}
	fi, err := os.Stat(p)
	switch typ {
	case v1.HostPathDirectoryOrCreate:
		if os.IsNotExist(err) {
			return os.MkdirAll(p, 0o755)
		}
		if err == nil && !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
	case v1.HostPathFileOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
	case v1.HostPathDirectory:
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
	case v1.HostPathFile:
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a file", p)
		}
	case v1.HostPathSocket:
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%s is not a socket", p)
		}
	}
	return nil
}
