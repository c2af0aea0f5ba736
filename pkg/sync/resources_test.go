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
func TestSecurityProfile(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name    string
		profile v1.SeccompProfile
		want    *runtimeapi.SecurityProfile
		wantErr string
	}{
		{"runtime default", v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, ""},
		{"unconfined", v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined},
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, ""},
		{"localhost", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("profiles/audit.json")},
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/kubelet/seccomp/profiles/audit.json"}, ""},
		{"localhost, absolute", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("/etc/shadow")}, nil, "must be a path relative"},
		{"localhost, climbing out", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("../../../etc/shadow")}, nil, "must be a path relative"},
		{"localhost, climbing out inside", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("a/../../b")}, nil, "must be a path relative"},
		{"localhost, empty", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("")}, nil, "must be set"},
		{"localhost, unset", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}, nil, "must be set"},
		{"unknown type", v1.SeccompProfile{Type: "Strict"}, nil, "unknown seccomp profile type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := securityProfile(&tt.profile, "/var/lib/kubelet/seccomp")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.ProfileType != tt.want.ProfileType || got.LocalhostRef != tt.want.LocalhostRef {
				t.Fatalf("got %v %v, want %v", got, err, tt.want)
			}
		})
	}
}

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
		mounts, _, err := h.k.makeMounts(h.ctx, pod, &c, 0, vols, nil)
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
