package specopts

import (
	"context"
	"strings"
	"testing"

	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPodUserNamespace(t *testing.T) {
	one := []*runtimeapi.IDMapping{{HostId: 65536, Length: 65536}}
	for _, tt := range []struct {
		name    string
		opts    *runtimeapi.UserNamespace
		want    bool // a user namespace of its own
		wantErr string
	}{
		{name: "no options: the host's", opts: nil},
		{name: "NODE: the host's", opts: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "POD with one mapping each", opts: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: one, Gids: one}, want: true},
		{name: "POD without mappings", opts: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}, wantErr: "one user and one group mapping"},
		{name: "POD with two user mappings", opts: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: append(one, one...), Gids: one}, wantErr: "got 2 and 1"},
		{name: "CONTAINER", opts: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_CONTAINER, Uids: one, Gids: one}, wantErr: "CONTAINER is not supported"},
		{name: "the host's root mapped", opts: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: []*runtimeapi.IDMapping{{HostId: 0, Length: 65536}}, Gids: one}, wantErr: "host's root"},
		{name: "past 2^32", opts: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: one, Gids: []*runtimeapi.IDMapping{{HostId: 1<<32 - 1, Length: 2}}}, wantErr: "past 2^32"},
		{name: "no IDs", opts: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: []*runtimeapi.IDMapping{{HostId: 65536}}, Gids: one}, wantErr: "maps no IDs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			uids, gids, err := PodUserNamespace(&runtimeapi.NamespaceOption{UsernsOptions: tt.opts})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || (uids != nil) != tt.want || (gids != nil) != tt.want {
				t.Fatalf("uids %v gids %v err %v, want a user namespace: %v", uids, gids, err, tt.want)
			}
		})
	}
}

// The pause container's user namespace is a new one (no path), its mappings set once even when the default
// spec already lists the namespace.
func TestWithUserNamespace(t *testing.T) {
	m := []runtimespec.LinuxIDMapping{{HostID: 65536, Size: 65536}}
	s := &runtimespec.Spec{Linux: &runtimespec.Linux{Namespaces: []runtimespec.LinuxNamespace{{Type: runtimespec.UserNamespace, Path: "/old"}}}}
	if err := WithUserNamespace(m, m, "")(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	if len(s.Linux.Namespaces) != 1 || s.Linux.Namespaces[0].Path != "" || len(s.Linux.UIDMappings) != 1 || len(s.Linux.GIDMappings) != 1 {
		t.Fatalf("spec %+v", s.Linux)
	}
}
