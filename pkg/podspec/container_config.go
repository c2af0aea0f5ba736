package podspec

import (
	"fmt"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerInput is what a container instance's config is built from: the spec, and what the caller
// resolved for it (its image, env, mounts, resources and security context).
type ContainerInput struct {
	Pod       *v1.Pod
	Container *v1.Container
	// Kind is KindInit, KindSidecar, KindApp or KindEphemeral.
	Kind         string
	RestartCount int32
	// ImageRef is the image as the runtime resolved it.
	ImageRef string
	// Env is the resolved environment (Env); the command and args are expanded against it.
	Env []*runtimeapi.KeyValue
	// Mounts are the container's mounts, host paths resolved.
	Mounts []*runtimeapi.Mount
	// MessagePath is the host file of its termination message; "" when none.
	MessagePath string
	// GracePeriod is the pod's termination grace period in seconds, recorded for when the spec is gone.
	GracePeriod int64
	// Resources are its CRI resources (ContainerResources).
	Resources *runtimeapi.LinuxContainerResources
	// SecurityContext is its CRI security context (ContainerSecurityContext, completed by the caller).
	SecurityContext *runtimeapi.LinuxContainerSecurityContext
}

// ContainerConfig builds the CRI config of one container instance. Its log is <name>/<restart count>.log
// under the sandbox's log directory. In a user namespace (the security context's mode POD) every mount
// carries the pod's mappings, as upstream's kubelet sends them: the runtime mounts each ID-mapped, so what
// the host's root owns the pod's root owns.
func ContainerConfig(in ContainerInput) *runtimeapi.ContainerConfig {
	c := in.Container
	if u := in.SecurityContext.GetNamespaceOptions().GetUsernsOptions(); u.GetMode() == runtimeapi.NamespaceMode_POD {
		for _, m := range in.Mounts {
			m.UidMappings, m.GidMappings = u.GetUids(), u.GetGids()
		}
	}
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(in.RestartCount)},
		Image:       &runtimeapi.ImageSpec{Image: in.ImageRef, UserSpecifiedImage: c.Image},
		Command:     ExpandAll(c.Command, in.Env),
		Args:        ExpandAll(c.Args, in.Env),
		WorkingDir:  c.WorkingDir,
		Envs:        in.Env,
		Mounts:      in.Mounts,
		Labels:      ContainerLabels(in.Pod, c.Name, in.Kind),
		Annotations: ContainerAnnotations(in.Pod, c, in.RestartCount, in.MessagePath, in.GracePeriod),
		LogPath:     filepath.Join(c.Name, strconv.Itoa(int(in.RestartCount))+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       in.Resources,
			SecurityContext: in.SecurityContext,
		},
	}
}

// Propagation maps a volume mount's propagation to CRI's; private when unset.
func Propagation(p *v1.MountPropagationMode) runtimeapi.MountPropagation {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
	switch *p {
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// RecursiveReadOnly resolves a volume mount's recursiveReadOnly as upstream's kubelet does: Disabled (or
// unset) is not recursive; IfPossible is when the runtime supports it; Enabled must be supported. Either
// needs readOnly and no propagation other than None.
func RecursiveReadOnly(m *v1.VolumeMount, runtimeSupports bool) (bool, error) {
	if m.RecursiveReadOnly == nil || *m.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !m.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", m.Name)
	}
	if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q",
			m.Name, *m.MountPropagation)
	}
	switch mode := *m.RecursiveReadOnly; mode {
	case v1.RecursiveReadOnlyIfPossible:
		return runtimeSupports, nil
	case v1.RecursiveReadOnlyEnabled:
		if !runtimeSupports {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", m.Name)
		}
		return true, nil
	default:
		return false, fmt.Errorf("unknown recursive read-only mode %q", mode)
	}
}
