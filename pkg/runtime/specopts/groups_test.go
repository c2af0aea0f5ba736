package specopts

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	testPasswd = "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\nother:x:1001:1001::/:/bin/sh\n"
	testGroup  = "root:x:0:\nwheel:x:10:root\nuser:x:1000:\nextra:x:50000:user,other\nmore:x:50001:other\n"
)

// rootfs writes an image root with the given /etc/passwd and /etc/group ("" leaves the file out).
func rootfs(t *testing.T, passwd, group string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"passwd": passwd, "group": group} {
		if data == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "etc", name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestGroupsUser(t *testing.T) {
	uid := &runtimeapi.Int64Value{Value: 1000}
	for _, tc := range []struct {
		sc        *runtimeapi.LinuxContainerSecurityContext
		imageUser string
		want      string
	}{
		{&runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "user", RunAsUser: uid}, "other", "user"},
		{&runtimeapi.LinuxContainerSecurityContext{RunAsUser: uid}, "other", "1000"},
		{&runtimeapi.LinuxContainerSecurityContext{}, "other:extra", "other"},
		{nil, "", "0"},
	} {
		if got := GroupsUser(tc.sc, tc.imageUser); got != tc.want {
			t.Errorf("GroupsUser(%v, %q) = %q, want %q", tc.sc, tc.imageUser, got, tc.want)
		}
	}
}

// The policy's groups from an image's /etc/group: Merge adds the user's memberships to the primary gid and
// the pod's groups, Strict leaves them out; a user the image does not know, or an image without the files,
// adds nothing.
func TestSupplementalGroupsPolicy(t *testing.T) {
	merge, strict := runtimeapi.SupplementalGroupsPolicy_Merge, runtimeapi.SupplementalGroupsPolicy_Strict
	for _, tc := range []struct {
		name          string
		passwd, group string
		uid, gid      uint32
		username      string
		policy        runtimeapi.SupplementalGroupsPolicy
		pod           []int64
		want          []uint32
	}{
		{name: "merge by uid", passwd: testPasswd, group: testGroup, uid: 1000, gid: 1000, policy: merge, pod: []int64{60000},
			want: []uint32{1000, 50000, 60000}},
		{name: "strict by uid", passwd: testPasswd, group: testGroup, uid: 1000, gid: 1000, policy: strict, pod: []int64{60000},
			want: []uint32{1000, 60000}},
		{name: "merge by name", passwd: testPasswd, group: testGroup, uid: 1001, gid: 1001, username: "other", policy: merge,
			want: []uint32{1001, 50000, 50001}},
		{name: "merge root", passwd: testPasswd, group: testGroup, policy: merge, want: []uint32{0, 10}},
		{name: "merge, pod group repeats the image's", passwd: testPasswd, group: testGroup, uid: 1000, gid: 1000, policy: merge,
			pod: []int64{50000, 1000}, want: []uint32{1000, 50000}},
		{name: "merge, uid unknown to the image", passwd: testPasswd, group: testGroup, uid: 2000, gid: 3000, policy: merge,
			pod: []int64{60000}, want: []uint32{3000, 60000}},
		{name: "merge, no /etc/group", passwd: testPasswd, uid: 1000, gid: 1000, policy: merge, pod: []int64{60000},
			want: []uint32{1000, 60000}},
		{name: "merge, no /etc/passwd", group: testGroup, uid: 1000, gid: 1000, policy: merge, want: []uint32{1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: int64(tc.uid)},
				RunAsUsername: tc.username, SupplementalGroups: tc.pod, SupplementalGroupsPolicy: tc.policy}
			// As the user option leaves it: the primary gid among the additional ones.
			s := &runtimespec.Spec{Root: &runtimespec.Root{Path: rootfs(t, tc.passwd, tc.group)},
				Process: &runtimespec.Process{User: runtimespec.User{UID: tc.uid, GID: tc.gid, AdditionalGids: []uint32{tc.gid}}}}
			if err := WithSupplementalGroupsPolicy(sc, "")(context.Background(), nil, &containers.Container{}, s); err != nil {
				t.Fatal(err)
			}
			if got := s.Process.User.AdditionalGids; !slices.Equal(got, tc.want) {
				t.Errorf("groups %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnknownSupplementalGroupsPolicy(t *testing.T) {
	sc := &runtimeapi.LinuxContainerSecurityContext{SupplementalGroupsPolicy: 7}
	if err := WithSupplementalGroupsPolicy(sc, "")(context.Background(), nil, &containers.Container{}, &runtimespec.Spec{}); err == nil {
		t.Error("an unknown policy was accepted")
	}
}
