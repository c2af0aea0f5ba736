package runtime

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	capability "github.com/containerd/containerd/v2/pkg/cap"
	cdispec "github.com/containerd/containerd/v2/pkg/cdi"
	"github.com/containerd/containerd/v2/pkg/oci"
	osinterface "github.com/containerd/containerd/v2/pkg/os"
	"github.com/containerd/errdefs"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime/specopts"
)

// allCapabilities is what "ALL" means in capability add/drop lists: the capabilities this host knows.
var allCapabilities = func() []string {
	caps, err := capability.Current()
	if err != nil {
		return capability.Known()
	}
	return caps
}()

// containerSpecOpts builds the OCI spec of an app container: the image's process merged with the CRI config
// as Kubernetes does, the sandbox's namespaces, mounts, resources and security settings.
func (r *Runtime) containerSpecOpts(id string, sandboxPid, targetPid uint32, sb *sandboxMeta, meta *containerMeta, config *runtimeapi.ContainerConfig, img *imagespec.ImageConfig) ([]oci.SpecOpts, error) {
	sc := config.GetLinux().GetSecurityContext()
	opts := []oci.SpecOpts{
		oci.WithDefaultSpec(),
		oci.WithoutRunMount,
		specopts.WithoutDefaultSecuritySettings,
		specopts.WithProcessArgs(config, img),
		oci.WithDefaultPathEnv,
		oci.WithNewPrivileges,
	}
	if config.GetWorkingDir() != "" {
		opts = append(opts, oci.WithProcessCwd(config.GetWorkingDir()))
	} else if img.WorkingDir != "" {
		opts = append(opts, oci.WithProcessCwd(img.WorkingDir))
	}
	if config.GetTty() {
		opts = append(opts, oci.WithTTY)
	}
	env := []string{"HOSTNAME=" + sb.Hostname}
	env = append(env, img.Env...)
	for _, e := range config.GetEnvs() {
		env = append(env, e.GetKey()+"="+e.GetValue())
	}
	opts = append(opts, oci.WithEnv(env))

	// The sandbox's hosts, resolv.conf, hostname and /dev/shm, unless the caller mounts its own there.
	var extra []*runtimeapi.Mount
	for _, m := range podMounts(r.sandboxDirOf(meta.SandboxID, sb), sb.HostIPC, sb.hasShm()) {
		if !hasMount(config.GetMounts(), m.Destination) {
			extra = append(extra, &runtimeapi.Mount{ContainerPath: m.Destination, HostPath: m.Source})
		}
	}
	opts = append(opts,
		specopts.WithMounts(osinterface.RealOS{}, config, extra),
		oci.WithMaskedPaths(nil), oci.WithReadonlyPaths(nil),
	)
	if mp := sc.GetMaskedPaths(); mp != nil {
		opts = append(opts, oci.WithMaskedPaths(mp))
	}
	if rp := sc.GetReadonlyPaths(); rp != nil {
		opts = append(opts, oci.WithReadonlyPaths(rp))
	}
	opts = append(opts,
		specopts.WithDevices(osinterface.RealOS{}, config),
		specopts.WithCapabilities(sc, allCapabilities),
	)
	if sc.GetPrivileged() {
		opts = append(opts, oci.WithPrivileged, oci.WithHostDevices, oci.WithAllDevicesAllowed)
	}
	opts = append(opts, specopts.WithoutAmbientCaps)
	if sc.GetNoNewPrivs() {
		opts = append(opts, oci.WithNoNewPrivileges)
	}
	if sc.GetReadonlyRootfs() {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	userOpt, err := userSpecOpt(sc, img.User)
	if err != nil {
		return nil, err
	}
	if userOpt != nil {
		opts = append(opts, userOpt)
	}
	if sp := seccompOpt(sc); sp != nil && !sc.GetPrivileged() {
		opts = append(opts, sp)
	}
	res := config.GetLinux().GetResources()
	if res != nil {
		adj := r.oom.clamp(int(res.GetOomScoreAdj()))
		clamped := proto.Clone(res).(*runtimeapi.LinuxContainerResources)
		clamped.OomScoreAdj = int64(adj)
		opts = append(opts, specopts.WithResources(clamped), specopts.WithPodOOMScoreAdj(adj))
	}
	if meta.CgroupsPath != "" {
		opts = append(opts, oci.WithCgroup(meta.CgroupsPath))
	}
	opts = append(opts,
		specopts.WithPodNamespaces(sc, sandboxPid, targetPid),
		specopts.WithSupplementalGroupsPolicy(sc, img.User),
		oci.WithAnnotations(map[string]string{shimGroupAnnotation: meta.SandboxID}),
	)
	// CDI devices last, as containerd's CRI plugin applies them: their edits (environment, device nodes,
	// mounts, hooks) must not be reset by an option after them. Specs are read from /etc/cdi and
	// /var/run/cdi at each container's creation; an unknown device fails the creation.
	if names := cdiDeviceNames(config); len(names) > 0 {
		opts = append(opts, cdispec.WithCDIDevices(names...))
	}
	// The identity the process starts with, as the spec ends up (CDI may add groups), for its status.
	return append(opts, recordUser(meta)), nil
}

// cdiDeviceNames are the fully qualified CDI device names the container asks for (vendor.com/class=name).
func cdiDeviceNames(config *runtimeapi.ContainerConfig) []string {
	var out []string
	for _, d := range config.GetCDIDevices() {
		if d.GetName() != "" {
			out = append(out, d.GetName())
		}
	}
	return out
}

func hasMount(ms []*runtimeapi.Mount, dest string) bool {
	for _, m := range ms {
		if m.GetContainerPath() == dest {
			return true
		}
	}
	return false
}

// userSpecOpt sets the process user: runAsUser/runAsGroup, runAsUsername (with runAsGroup), or the image's
// User. A runAsGroup without a user is an error, as the CRI requires and containerd's CRI plugin answers: the
// kubelet fills the user in from the image, so only a CRI client that forgot it sends one.
func userSpecOpt(sc *runtimeapi.LinuxContainerSecurityContext, imageUser string) (oci.SpecOpts, error) {
	uid, gid, name := sc.GetRunAsUser(), sc.GetRunAsGroup(), sc.GetRunAsUsername()
	switch {
	case name != "" && gid != nil:
		user := fmt.Sprintf("%s:%d", name, gid.GetValue())
		return explain(fmt.Sprintf("user %q", user), oci.WithUser(user)), nil
	case name != "":
		return explain(fmt.Sprintf("user %q", name), oci.WithUsername(name)), nil
	case uid != nil && gid != nil:
		return oci.WithUIDGID(uint32(uid.GetValue()), uint32(gid.GetValue())), nil
	case uid != nil:
		return oci.WithUserID(uint32(uid.GetValue())), nil
	case gid != nil:
		return nil, fmt.Errorf("runAsGroup %d is set without runAsUser or runAsUsername: %w", gid.GetValue(), errdefs.ErrInvalidArgument)
	case imageUser != "":
		return explain(fmt.Sprintf("image user %q", imageUser), oci.WithUser(imageUser)), nil
	}
	return nil, nil
}

// explain prefixes the error of a spec option with what it was doing.
func explain(what string, opt oci.SpecOpts) oci.SpecOpts {
	return func(ctx context.Context, c oci.Client, ctr *containers.Container, s *runtimespec.Spec) error {
		if err := opt(ctx, c, ctr, s); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}

// seccompOpt applies the runtime's default profile for RuntimeDefault; Unconfined (Kubernetes' default) and
// unset leave the process unfiltered. Localhost profiles are read from the given path.
func seccompOpt(sc *runtimeapi.LinuxContainerSecurityContext) oci.SpecOpts {
	p := sc.GetSeccomp()
	if p == nil {
		return nil
	}
	switch p.GetProfileType() {
	case runtimeapi.SecurityProfile_RuntimeDefault:
		return seccomp.WithDefaultProfile()
	case runtimeapi.SecurityProfile_Localhost:
		return seccomp.WithProfile(p.GetLocalhostRef())
	}
	return nil
}
