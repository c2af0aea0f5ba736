package podsync

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/volume"
)

// A Localhost seccomp profile is a file under <root dir>/seccomp; nothing else on the host is handed to the
// runtime to read as a profile.
// Mount propagation as upstream allows it: HostToContainer for anyone, Bidirectional for privileged
// containers only; a mount of a volume the pod has not set up is an error, never a dropped mount.
func TestMakeMountsPropagation(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	vols := map[string]volume.Mounted{"data": {Path: t.TempDir()}}
	mode := func(m v1.MountPropagationMode) *v1.MountPropagationMode { return &m }
	yes := true
	tests := []struct {
		name       string
		mount      v1.VolumeMount
		privileged bool
		want       runtimeapi.MountPropagation
		err        string
	}{
		{"default private", v1.VolumeMount{Name: "data", MountPath: "/d"}, false, runtimeapi.MountPropagation_PROPAGATION_PRIVATE, ""},
		{"host to container", v1.VolumeMount{Name: "data", MountPath: "/d", MountPropagation: mode(v1.MountPropagationHostToContainer)}, false, runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, ""},
		{"bidirectional, privileged", v1.VolumeMount{Name: "data", MountPath: "/d", MountPropagation: mode(v1.MountPropagationBidirectional)}, true, runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, ""},
		{"bidirectional, not privileged", v1.VolumeMount{Name: "data", MountPath: "/d", MountPropagation: mode(v1.MountPropagationBidirectional)}, false, 0, "available only to privileged containers"},
		{"unknown volume", v1.VolumeMount{Name: "ghost", MountPath: "/g"}, false, 0, `cannot find volume "ghost"`},
	}
	for _, tt := range tests {
		c := pod.Spec.Containers[0]
		c.VolumeMounts = []v1.VolumeMount{tt.mount}
		if tt.privileged {
			c.SecurityContext = &v1.SecurityContext{Privileged: &yes}
		}
		mounts, _, err := h.k.makeMounts(h.ctx, pod, &c, 0, &startEnv{volumes: vols}, nil)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || len(mounts) < 1 || mounts[0].Propagation != tt.want {
			t.Errorf("%s: %v %v, want %v", tt.name, mounts, err, tt.want)
		}
	}
}
