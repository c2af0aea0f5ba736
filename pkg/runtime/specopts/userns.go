package specopts

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodUserNamespace returns the pod's user namespace mappings when its namespace options ask for one (mode
// POD with one mapping of users and one of groups, as upstream's kubelet sends them), or nil ones when the
// pod runs in the host's. Other modes, and a POD mode without exactly one mapping each, are errors, as in
// containerd's CRI plugin.
func PodUserNamespace(ns *runtimeapi.NamespaceOption) (uids, gids []runtimespec.LinuxIDMapping, err error) {
	u := ns.GetUsernsOptions()
	if u == nil || u.GetMode() == runtimeapi.NamespaceMode_NODE {
		return nil, nil, nil
	}
	if u.GetMode() != runtimeapi.NamespaceMode_POD {
		return nil, nil, fmt.Errorf("user namespace mode %s is not supported, only POD and NODE", u.GetMode())
	}
	if len(u.GetUids()) != 1 || len(u.GetGids()) != 1 {
		return nil, nil, fmt.Errorf("a pod user namespace needs one user and one group mapping, got %d and %d", len(u.GetUids()), len(u.GetGids()))
	}
	uids, gids = IDMappings(u.GetUids()), IDMappings(u.GetGids())
	for _, m := range append(append([]runtimespec.LinuxIDMapping(nil), uids...), gids...) {
		if m.Size == 0 || m.HostID == 0 || uint64(m.HostID)+uint64(m.Size) > 1<<32 {
			return nil, nil, fmt.Errorf("user namespace mapping %d:%d:%d maps no IDs, the host's root, or IDs past 2^32", m.ContainerID, m.HostID, m.Size)
		}
	}
	return uids, gids, nil
}

// IDMappings converts CRI ID mappings to the OCI spec's.
func IDMappings(ms []*runtimeapi.IDMapping) []runtimespec.LinuxIDMapping {
	var out []runtimespec.LinuxIDMapping
	for _, m := range ms {
		out = append(out, runtimespec.LinuxIDMapping{ContainerID: m.GetContainerId(), HostID: m.GetHostId(), Size: m.GetLength()})
	}
	return out
}

// WithUserNamespace puts the process in a user namespace with the given mappings: a new one when path is
// empty (the pause container, whose network, IPC and UTS namespaces runc then creates inside it, owned by
// it), else the one at path (an app container joining its pause container's), as containerd's CRI plugin
// gives both the mappings and the path.
func WithUserNamespace(uids, gids []runtimespec.LinuxIDMapping, path string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
		if s.Linux == nil {
			s.Linux = &runtimespec.Linux{}
		}
		s.Linux.UIDMappings, s.Linux.GIDMappings = uids, gids
		for i, ns := range s.Linux.Namespaces {
			if ns.Type == runtimespec.UserNamespace {
				s.Linux.Namespaces[i].Path = path
				return nil
			}
		}
		s.Linux.Namespaces = append(s.Linux.Namespaces, runtimespec.LinuxNamespace{Type: runtimespec.UserNamespace, Path: path})
		return nil
	}
}
