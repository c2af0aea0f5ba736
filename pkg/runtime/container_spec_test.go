package runtime

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The process user from the CRI security context, as containerd's CRI plugin sets it: a group needs a user
// (the CRI requires it), a user name takes the group beside it, the image's user applies when nothing is set.
func TestUserSpecOpt(t *testing.T) {
	i64 := func(v int64) *runtimeapi.Int64Value { return &runtimeapi.Int64Value{Value: v} }
	for _, tc := range []struct {
		name      string
		sc        *runtimeapi.LinuxContainerSecurityContext
		imageUser string
		uid, gid  uint32 // when the option needs no root filesystem
		noOpt     bool
		err       string
	}{
		{name: "uid and gid", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(2000)}, uid: 1000, gid: 2000},
		{name: "group alone", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: i64(2000)}, err: "runAsGroup 2000 is set without runAsUser"},
		{name: "group alone, image user", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: i64(2000)}, imageUser: "1000", err: "without runAsUser"},
		{name: "image numeric user and group", sc: &runtimeapi.LinuxContainerSecurityContext{}, imageUser: "10:20", uid: 10, gid: 20},
		{name: "nothing", sc: &runtimeapi.LinuxContainerSecurityContext{}, noOpt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := userSpecOpt(tc.sc, tc.imageUser)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errdefs.IsInvalidArgument(err) {
					t.Fatalf("err %v, want an invalid argument containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.noOpt {
				if opt != nil {
					t.Fatal("an option for nothing set")
				}
				return
			}
			s := &runtimespec.Spec{Process: &runtimespec.Process{}, Linux: &runtimespec.Linux{}}
			if err := opt(context.Background(), nil, &containers.Container{}, s); err != nil {
				t.Fatal(err)
			}
			if s.Process.User.UID != tc.uid || s.Process.User.GID != tc.gid {
				t.Errorf("user %d:%d, want %d:%d", s.Process.User.UID, s.Process.User.GID, tc.uid, tc.gid)
			}
		})
	}
}
