package podsync

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
