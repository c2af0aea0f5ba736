package runtime

import (
	"strings"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go/features"
)

// Pods run in user namespaces only where runc reports user namespaces and ID-mapped mounts, as containerd's
// CRI plugin decides.
func TestRuncUsernsMissing(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		name string
		f    *features.Features
		want string // "" when supported
	}{
		{name: "runc 1.1: no features", f: nil, want: "runc 1.1 or older"},
		{name: "no Linux features", f: &features.Features{}, want: "runc 1.1 or older"},
		{name: "no user namespace", f: &features.Features{Linux: &features.Linux{Namespaces: []string{"pid", "network"}}}, want: "does not support user namespaces"},
		{name: "no ID-mapped mounts", f: &features.Features{Linux: &features.Linux{Namespaces: []string{"user"}}}, want: "ID-mapped mounts"},
		{name: "ID-mapped mounts off", f: &features.Features{Linux: &features.Linux{Namespaces: []string{"user"},
			MountExtensions: &features.MountExtensions{IDMap: &features.IDMap{Enabled: &no}}}}, want: "ID-mapped mounts"},
		{name: "both", f: &features.Features{Linux: &features.Linux{Namespaces: []string{"network", "user"},
			MountExtensions: &features.MountExtensions{IDMap: &features.IDMap{Enabled: &yes}}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := runcUsernsMissing(tt.f)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("runcUsernsMissing = %q, want %q", got, tt.want)
			}
		})
	}
}
