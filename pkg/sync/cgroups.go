package podsync

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodCgroups manages pod-level cgroups.
type PodCgroups interface {
	// EnsurePod creates or updates the pod's cgroup and returns the cgroup parent to give the runtime in
	// LinuxPodSandboxConfig.CgroupParent ("" when none).
	EnsurePod(ctx context.Context, pod *v1.Pod) (string, error)
	// RemovePod kills what still runs in the pod's cgroup and removes it.
	RemovePod(ctx context.Context, uid types.UID) error
	// CleanupOrphans removes pod cgroups of pods not in active (called in housekeeping).
	CleanupOrphans(ctx context.Context, active map[types.UID]bool) error
}

// NoopCgroups is a PodCgroups that manages nothing: the runtime places containers itself.
type NoopCgroups struct{}

var _ PodCgroups = NoopCgroups{}

// EnsurePod returns no cgroup parent.
func (NoopCgroups) EnsurePod(context.Context, *v1.Pod) (string, error) { return "", nil }

// RemovePod does nothing.
func (NoopCgroups) RemovePod(context.Context, types.UID) error { return nil }

// CleanupOrphans does nothing.
func (NoopCgroups) CleanupOrphans(context.Context, map[types.UID]bool) error { return nil }
