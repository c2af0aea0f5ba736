package podsync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podspec"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// startEnv is what starting the containers of one sync shares.
type startEnv struct {
	sandboxID     string
	sandboxConfig *runtimeapi.PodSandboxConfig
	podIPs        []string
	volumes       map[string]volume.Mounted
	imageVolumes  map[string]imageVolume // by volume name; pulled before the first container starts
	state         *pleg.PodState
}

// containerConfig builds the CRI config of one container instance (podspec.ContainerConfig): it resolves the
// env, sets up the mounts, asks the runtime for the image's user where runAsNonRoot or a lone runAsGroup
// needs it, and writes the pod's /etc/hosts and the container's log directory.
func (k *Kubelet) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, kind string, restartCount int32, imageRef string, env *startEnv) (*runtimeapi.ContainerConfig, error) {
	envs, err := k.makeEnv(ctx, pod, c, env.podIPs, env.volumes)
	if err != nil {
		return nil, err
	}
	mounts, messagePath, err := k.makeMounts(ctx, pod, c, restartCount, env, envs)
	if err != nil {
		return nil, err
	}
	secCtx, err := podspec.ContainerSecurityContext(pod, c, filepath.Join(k.cfg.RootDir, "seccomp"),
		env.sandboxConfig.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions())
	if err != nil {
		return nil, err
	}
	if kind == podspec.KindEphemeral {
		if err := targetNamespace(pod, c.Name, env.state, secCtx.NamespaceOptions); err != nil {
			return nil, err
		}
	}
	// A runAsGroup without a runAsUser runs as the image's user (root when it names none), as upstream sends
	// it: the CRI requires a user beside a group.
	if podspec.NeedsImageUser(pod, c) || podspec.GroupWithoutUser(secCtx) {
		st, err := k.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef}, false)
		if err != nil {
			return nil, fmt.Errorf("inspect image %q for its user: %w", c.Image, err)
		}
		var uid *int64
		if v := st.GetImage().GetUid(); v != nil {
			uid = &v.Value
		}
		user := st.GetImage().GetUsername()
		if err := podspec.VerifyRunAsNonRoot(pod, c, uid, user); err != nil {
			return nil, err
		}
		podspec.UserFromImage(secCtx, uid, user)
	} else if err := podspec.VerifyRunAsNonRoot(pod, c, nil, ""); err != nil {
		return nil, err
	}
	hostIPs := env.podIPs
	if pod.Spec.HostNetwork {
		hostIPs = nil // the node's /etc/hosts, with the pod's hostAliases
	}
	hosts, err := k.hostsMount(pod, c, hostIPs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", podspec.ErrConfigRef, err)
	}
	if hosts != nil {
		mounts = append(mounts, hosts)
	}
	if err := os.MkdirAll(filepath.Join(k.podLogDir(pod), c.Name), 0o755); err != nil {
		return nil, fmt.Errorf("create container log directory: %w", err)
	}
	cfg := podspec.ContainerConfig(podspec.ContainerInput{
		Pod: pod, Container: c, Kind: kind, RestartCount: restartCount, ImageRef: imageRef,
		Env: envs, Mounts: mounts, MessagePath: messagePath, GracePeriod: gracePeriodOf(pod, nil, nil),
		Resources: k.containerResources(pod, c), SecurityContext: secCtx,
	})
	devices, err := blockDevices(c, env.volumes)
	if err != nil {
		return nil, err
	}
	cfg.Devices = append(cfg.Devices, devices...)
	if len(c.Resources.Claims) > 0 {
		if k.cfg.DRA == nil {
			return nil, errNoDRA
		}
		ids, err := k.cfg.DRA.ContainerCDIDevices(pod, c)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: id})
		}
	}
	if k.cfg.Devices != nil {
		o, err := k.cfg.Devices.ContainerOptions(ctx, pod.UID, c.Name)
		if err != nil {
			return nil, err
		}
		withDevices(cfg, o)
	}
	return cfg, nil
}

// blockDevices maps the container's volumeDevices (raw block volumes) to the devices the runtime adds at
// their devicePath, read-write unless the volume is read-only, as upstream hands them to the runtime.
func blockDevices(c *v1.Container, volumes map[string]volume.Mounted) ([]*runtimeapi.Device, error) {
	var out []*runtimeapi.Device
	for _, d := range c.VolumeDevices {
		vol, ok := volumes[d.Name]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: cannot find volume %q to add as a device to container %q", podspec.ErrConfigRef, d.Name, c.Name)
		case !vol.Block:
			return nil, fmt.Errorf("%w: volume %q has volumeMode Filesystem, but is specified in volumeDevices of container %q", podspec.ErrConfigRef, d.Name, c.Name)
		}
		perms := "mrw"
		if vol.ReadOnly {
			perms = "r"
		}
		out = append(out, &runtimeapi.Device{ContainerPath: d.DevicePath, HostPath: vol.Path, Permissions: perms})
	}
	return out, nil
}

// makeMounts maps the container's volume mounts to host paths, and adds the termination message file. It
// returns the host path of that file ("" when none). A subPath (or subPathExpr, expanded with the
// container's env) is bound race-free onto a path of the kubelet's own, which the runtime mounts instead.
func (k *Kubelet) makeMounts(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int32, env *startEnv, envs []*runtimeapi.KeyValue) ([]*runtimeapi.Mount, string, error) {
	var mounts []*runtimeapi.Mount
	for i, m := range c.VolumeMounts {
		vol, ok := env.volumes[m.Name]
		if !ok {
			return nil, "", fmt.Errorf("%w: cannot find volume %q to mount into container %q", podspec.ErrConfigRef, m.Name, c.Name)
		}
		if vol.Block {
			return nil, "", fmt.Errorf("%w: volume %q has volumeMode Block, but is specified in volumeMounts of container %q", podspec.ErrConfigRef, m.Name, c.Name)
		}
		host := vol.Path
		if m.MountPropagation != nil && *m.MountPropagation == v1.MountPropagationBidirectional &&
			(c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged) {
			return nil, "", fmt.Errorf("%w: volume %q: Bidirectional mount propagation is available only to privileged containers", podspec.ErrConfigRef, m.Name)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = podspec.ExpandAll([]string{m.SubPathExpr}, envs)[0]
		}
		if vol.Image {
			// The runtime resolves the subPath inside the image it mounts.
			im, err := imageMount(&c.VolumeMounts[i], sub, env.imageVolumes[m.Name])
			if err != nil {
				return nil, "", fmt.Errorf("%w: %v", podspec.ErrConfigRef, err)
			}
			mounts = append(mounts, im)
			continue
		}
		if sub != "" {
			target := filepath.Join(k.podDir(pod.UID), "volume-subpaths", m.Name, c.Name, strconv.Itoa(i))
			if err := volume.BindSubPath(host, sub, target); err != nil {
				return nil, "", fmt.Errorf("%w: subPath %q of volume %q: %v", podspec.ErrConfigRef, sub, m.Name, err)
			}
			host = target
		}
		rro, err := podspec.RecursiveReadOnly(&c.VolumeMounts[i], m.RecursiveReadOnly != nil && k.supportsRecursiveReadOnly(ctx))
		if err != nil {
			return nil, "", fmt.Errorf("%w: failed to resolve recursive read-only mode: %v", podspec.ErrConfigRef, err)
		}
		mounts = append(mounts, &runtimeapi.Mount{
			ContainerPath: m.MountPath, HostPath: host, Readonly: m.ReadOnly || vol.ReadOnly, Propagation: podspec.Propagation(m.MountPropagation),
			RecursiveReadOnly: rro,
		})
	}
	messagePath := ""
	if c.TerminationMessagePath != "" {
		messagePath = podspec.TerminationMessageFile(k.podDir(pod.UID), c.Name, restartCount)
		if err := os.MkdirAll(filepath.Dir(messagePath), 0o750); err != nil {
			return nil, "", fmt.Errorf("create termination message directory: %w", err)
		}
		f, err := os.OpenFile(messagePath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
		if err != nil {
			return nil, "", fmt.Errorf("create termination message file: %w", err)
		}
		_ = f.Close()
		if err := os.Chmod(messagePath, 0o666); err != nil {
			return nil, "", fmt.Errorf("chmod termination message file: %w", err)
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: messagePath})
	}
	return mounts, messagePath, nil
}

// logRestartCount returns the restart count for a container with no instance left in the runtime: one past
// the highest <n>.log in its log directory, so numbering never goes back after a kubelet restart.
func (k *Kubelet) logRestartCount(pod *v1.Pod, name string) int32 {
	entries, err := os.ReadDir(filepath.Join(k.podLogDir(pod), name))
	if err != nil {
		return 0
	}
	next := int32(0)
	for _, e := range entries {
		base, ok := cutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(base, 10, 32); err == nil && int32(n) >= next {
			next = int32(n) + 1
		}
	}
	return next
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || s[len(s)-len(suffix):] != suffix {
		return s, false
	}
	return s[:len(s)-len(suffix)], true
}

// targetNamespace points an ephemeral container with a targetContainerName at the process namespace of that
// container's newest instance, as upstream does (the runtime refuses it unless that instance runs).
func targetNamespace(pod *v1.Pod, name string, state *pleg.PodState, ns *runtimeapi.NamespaceOption) error {
	var target string
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == name {
			target = ec.TargetContainerName
		}
	}
	if target == "" {
		return nil
	}
	var latest *runtimeapi.ContainerStatus
	if state != nil {
		latest = first(byName(state, "")[target])
	}
	if latest == nil {
		return fmt.Errorf("unable to find target container %s", target)
	}
	ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, latest.Id
	return nil
}
