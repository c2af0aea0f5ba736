package runtime

import (
	"context"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/typeurl/v2"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// recordUser is the last option of a container's spec: it writes the process's uid, gid and supplementary
// groups into the container's metadata, which is stored after the spec is built, for ContainerStatus.user.
func recordUser(meta *containerMeta) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
		if s.Process != nil {
			meta.User = linuxUser(s.Process.User)
		}
		return nil
	}
}

// linuxUser converts an OCI process user to CRI's, as containerd's CRI plugin reports it.
func linuxUser(u runtimespec.User) *runtimeapi.LinuxContainerUser {
	out := &runtimeapi.LinuxContainerUser{Uid: int64(u.UID), Gid: int64(u.GID)}
	for _, g := range u.AdditionalGids {
		out.SupplementalGroups = append(out.SupplementalGroups, int64(g))
	}
	return out
}

// containerUser is the identity a container's process started with: as recorded at its creation, else (a
// container created before it was recorded) as its stored spec says, else empty, as containerd's CRI plugin
// answers when it cannot tell.
func containerUser(rec containers.Container, meta *containerMeta) *runtimeapi.ContainerUser {
	if meta.User != nil {
		return &runtimeapi.ContainerUser{Linux: meta.User}
	}
	if rec.Spec != nil {
		if v, err := typeurl.UnmarshalAny(rec.Spec); err == nil {
			if s, ok := v.(*runtimespec.Spec); ok && s.Process != nil {
				return &runtimeapi.ContainerUser{Linux: linuxUser(s.Process.User)}
			}
		}
	}
	return &runtimeapi.ContainerUser{}
}
