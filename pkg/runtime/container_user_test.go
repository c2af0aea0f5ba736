package runtime

import (
	"context"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/typeurl/v2"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
)

// A container's user is recorded from its finished spec; a container from before the record answers from its
// stored spec, and one with neither reports an empty user.
func TestContainerUser(t *testing.T) {
	user := runtimespec.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 50000, 60000}}
	meta := &containerMeta{}
	if err := recordUser(meta)(context.Background(), nil, nil, &runtimespec.Spec{Process: &runtimespec.Process{User: user}}); err != nil {
		t.Fatal(err)
	}
	check := func(name string, rec containers.Container, meta *containerMeta) {
		t.Helper()
		u := containerUser(rec, meta).GetLinux()
		if u.GetUid() != 1000 || u.GetGid() != 1000 || !slices.Equal(u.GetSupplementalGroups(), []int64{1000, 50000, 60000}) {
			t.Errorf("%s: user %v", name, u)
		}
	}
	check("recorded", containers.Container{}, meta)
	spec, err := typeurl.MarshalAny(&runtimespec.Spec{Process: &runtimespec.Process{User: user}})
	if err != nil {
		t.Fatal(err)
	}
	check("from the spec", containers.Container{Spec: spec}, &containerMeta{})
	if u := containerUser(containers.Container{}, &containerMeta{}); u == nil || u.Linux != nil {
		t.Errorf("neither: %v", u)
	}
}
