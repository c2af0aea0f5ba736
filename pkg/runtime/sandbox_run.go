package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containerd/containerd/api/services/tasks/v1"
	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/runtime/specopts"
)

// sandboxOOMScoreAdj is what the pause container asks for (as upstream); clamped on hosts that refuse it.
const sandboxOOMScoreAdj = -998

// RunPodSandbox creates the pod's network namespace, attaches it to the pod network, and starts the pause
// container in it. Every step is undone if a later one fails.
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (_ string, retErr error) {
	ctx = r.ns(ctx)
	md := config.GetMetadata()
	if md == nil || md.Name == "" || md.Namespace == "" || md.Uid == "" {
		return "", fmt.Errorf("run pod sandbox: metadata name, namespace and uid are required")
	}
	podRef := md.Namespace + "/" + md.Name
	id := newID()
	logger(ctx).V(3).Info("Running pod sandbox", "pod", podRef, "sandbox", id)
	unlock := r.sandboxLocks.lock(id)
	defer unlock()

	nsOpts := config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	meta := &sandboxMeta{
		Metadata:     md,
		Labels:       config.GetLabels(),
		Annotations:  config.GetAnnotations(),
		LogDirectory: config.GetLogDirectory(),
		HostNetwork:  nsOpts.GetNetwork() == runtimeapi.NamespaceMode_NODE,
		HostPID:      nsOpts.GetPid() == runtimeapi.NamespaceMode_NODE,
		HostIPC:      nsOpts.GetIpc() == runtimeapi.NamespaceMode_NODE,
		CgroupParent: config.GetLinux().GetCgroupParent(),
		Ports:        config.GetPortMappings(),
		Handler:      runtimeHandler,
		CreatedAt:    r.clock.Now().UnixNano(),
	}
	meta.Hostname = sandboxHostname(config, meta.HostNetwork)
	uids, gids, err := specopts.PodUserNamespace(nsOpts)
	if err != nil {
		return "", fmt.Errorf("run pod sandbox for %s: %w", podRef, err)
	}
	if uids != nil {
		if meta.HostNetwork || meta.HostPID || meta.HostIPC {
			return "", fmt.Errorf("run pod sandbox for %s: a pod in a user namespace of its own cannot share the host's network, PID or IPC namespace", podRef)
		}
		if ok, why := r.userNamespaces(ctx); !ok {
			return "", fmt.Errorf("run pod sandbox for %s: pods in user namespaces are not supported on this host: %s", podRef, why)
		}
		meta.Userns = nsOpts.GetUsernsOptions()
	}

	image, facts, err := r.resolveImage(ctx, r.cfg.PauseImage)
	if err != nil {
		return "", fmt.Errorf("run pod sandbox for %s: pause image: %w", podRef, err)
	}

	// The record comes first, marked incomplete, so that whatever a crash leaves of a sandbox (files, /dev/shm,
	// network namespace, IP reservation, pause task) belongs to a sandbox the kubelet sees NOTREADY and removes:
	// StopPodSandbox undoes each step whether it happened or not. While RunPodSandbox runs, lists leave the
	// sandbox out and the reconcile loop leaves it alone.
	if !meta.HostNetwork {
		meta.NetnsName = "nodeagent-" + id[:16]
		meta.NetnsPath = cni.NetnsPath(meta.NetnsName)
	}
	meta.Dir = r.sandboxDir(id)
	r.creating.Store(id, struct{}{})
	defer r.creating.Delete(id)
	lctx, err := r.withLease(ctx)
	if err != nil {
		return "", fmt.Errorf("run pod sandbox for %s: %w", podRef, err)
	}
	var remap []snapshots.Opt
	if meta.Userns != nil {
		remap = append(remap, remapLabels(uids, gids))
	}
	rootfs := r.withImageSnapshot(id, image, facts, remap...)
	specOpts := r.sandboxSpecOpts(id, meta, config, facts.config.Config)
	if pauseMountsOnly(config) && meta.Userns == nil { // the shared view is not ID-mapped
		sharedRoot, err := r.sharedPauseRoot(ctx, facts)
		if err != nil { // the snapshot of its own below reports what is wrong with the image, if anything
			logger(ctx).V(2).Info("Pause container runs from a snapshot of its own", "pod", podRef, "err", err)
		}
		if sharedRoot != "" {
			rootfs = withImageName(image)
			specOpts = append(specOpts, oci.WithRootFSPath(sharedRoot))
		}
	}
	cont, err := r.client.NewContainer(lctx, id,
		rootfs,
		containerd.WithRuntime("io.containerd.runc.v2", runcOptions(meta.CgroupParent)),
		containerd.WithNewSpec(specOpts...),
		containerd.WithContainerLabels(map[string]string{labelKind: kindSandbox, labelPodUID: podUIDLabel(config.GetLabels(), md.Uid), labelIncomplete: "true"}),
		containerd.WithContainerExtension(extensionMeta, meta),
	)
	if err != nil {
		return "", fmt.Errorf("run pod sandbox for %s: create pause container: %w", podRef, err)
	}
	defer func() {
		if retErr != nil {
			cctx, cancel := r.cleanupContext(ctx)
			defer cancel()
			undoFailed(ctx, "delete the pause container", podRef, id, cont.Delete(cctx, containerd.WithSnapshotCleanup))
		}
	}()

	undoDir, err := prepareSandboxDir(meta, config)
	if err != nil {
		return "", fmt.Errorf("run pod sandbox for %s: %w", podRef, err)
	}
	defer func() {
		if retErr != nil {
			undoFailed(ctx, "remove the sandbox directory", podRef, id, undoDir())
		}
	}()

	// The network is set up while the pause container starts: neither needs the other until the IPs are
	// recorded, and both mostly wait on other processes. A pod in a user namespace gets the network namespace
	// runc made for its pause container inside it, once the pause task exists.
	var waitNetwork func() networkResult
	startNetwork := func(create func() error) error {
		if err := create(); err != nil {
			return err
		}
		wait := r.setupNetwork(ctx, id, meta)
		waitNetwork = wait
		return nil
	}
	defer func() {
		if retErr == nil || meta.HostNetwork {
			return
		}
		if waitNetwork != nil {
			if res := waitNetwork(); res.err == nil {
				cctx, cancel := r.cleanupContext(ctx)
				defer cancel()
				undoFailed(ctx, "tear the pod network down", podRef, id, r.cfg.Network.Teardown(cctx, id, meta.NetnsPath, cniPod(meta)))
			}
		}
		undoFailed(ctx, "delete the network namespace", podRef, id, cni.DeleteNetns(meta.NetnsName))
	}()
	if !meta.HostNetwork && meta.Userns == nil {
		if err := startNetwork(func() error { _, err := cni.CreateNetns(meta.NetnsName); return err }); err != nil {
			return "", fmt.Errorf("run pod sandbox for %s: %w", podRef, err)
		}
	}
	rec, err := cont.Info(ctx, containerd.WithoutRefreshedMetadata) // the record Create returned
	if err != nil {
		return "", fmt.Errorf("run pod sandbox for %s: %w", podRef, err)
	}
	pausePID, err := r.createTask(ctx, rec, cio.NullIO)
	if err != nil {
		return "", fmt.Errorf("run pod sandbox for %s: create pause task: %w", podRef, err)
	}
	defer func() {
		if retErr != nil {
			cctx, cancel := r.cleanupContext(ctx)
			defer cancel()
			undoFailed(ctx, "delete the pause task", podRef, id, r.deleteTask(cctx, id))
		}
	}()
	if meta.Userns != nil {
		if err := startNetwork(func() error { _, err := cni.PinNetns(meta.NetnsName, int(pausePID)); return err }); err != nil {
			return "", fmt.Errorf("run pod sandbox for %s: %w", podRef, err)
		}
	}
	// The sandbox is marked complete, with its IPs, once its network is up, while the pause process starts
	// (a start that fails undoes everything).
	finish := inBackground(func() error {
		labels := map[string]string{labelIncomplete: "false"}
		if waitNetwork != nil {
			res := waitNetwork()
			if res.err != nil {
				return fmt.Errorf("setup network: %w", res.err)
			}
			labels[labelIPs] = strings.Join(res.ips, ",")
			meta.IPs = res.ips
		}
		if err := r.setLabels(ctx, id, labels); err != nil {
			return fmt.Errorf("record IPs: %w", err)
		}
		return nil
	})
	defer func() {
		_ = finish() // before the container is deleted
		if retErr != nil {
			// Should the delete below fail, the record must not look like a sandbox that was set up.
			cctx, cancel := r.cleanupContext(ctx)
			defer cancel()
			undoFailed(ctx, "mark the sandbox incomplete", podRef, id, r.setLabels(cctx, id, map[string]string{labelIncomplete: "true"}))
		}
	}()
	started, err := r.client.TaskService().Start(ctx, &tasks.StartRequest{ContainerID: id})
	if err != nil {
		return "", fmt.Errorf("run pod sandbox for %s: start pause: %w", podRef, errgrpc.ToNative(err))
	}
	r.procs.remember(id, int(started.GetPid()))
	if err := finish(); err != nil {
		return "", fmt.Errorf("run pod sandbox for %s: %w", podRef, err)
	}
	logger(ctx).V(2).Info("Started pod sandbox", "pod", podRef, "sandbox", id, "ips", meta.IPs)
	return id, nil
}

// undoFailed logs an undo step of a failed RunPodSandbox that failed in turn: what it leaves behind is the
// stopped sandbox's to remove (StopPodSandbox and RemovePodSandbox redo each step), but nothing is left
// silently. A step with nothing to undo is not a failure.
func undoFailed(ctx context.Context, what, podRef, id string, err error) {
	if err == nil || errdefs.IsNotFound(err) {
		return
	}
	logger(ctx).Error(err, "Undoing a failed sandbox start failed; the sandbox's removal will retry", "step", what,
		"pod", podRef, "sandbox", id)
}

// prepareSandboxDir writes the pod's hosts, resolv.conf and hostname into the sandbox's directory and mounts
// its /dev/shm there; the function it returns undoes both.
func prepareSandboxDir(meta *sandboxMeta, config *runtimeapi.PodSandboxConfig) (undo func() error, err error) {
	if err := writeSandboxFiles(meta.Dir, config, meta.HostNetwork); err != nil {
		return nil, err
	}
	undo = func() error { return removeAll(meta.Dir) }
	if meta.HostIPC {
		return undo, nil
	}
	shm := shmDir(meta.Dir, false)
	if err := mountSandboxShm(shm); err != nil {
		return nil, errors.Join(err, undo())
	}
	return func() error { return errors.Join(unmountSandboxShm(shm), removeAll(meta.Dir)) }, nil
}

// inBackground runs f in a goroutine; the function it returns waits for f's result, and may be called again.
func inBackground[T any](f func() T) func() T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	var once sync.Once
	var res T
	return func() T {
		once.Do(func() { res = <-ch })
		return res
	}
}

type networkResult struct {
	ips []string
	err error
}

// setupNetwork attaches the sandbox's namespace to the pod network in the background; the function it
// returns waits for the result, and may be called again.
func (r *Runtime) setupNetwork(ctx context.Context, id string, meta *sandboxMeta) func() networkResult {
	pod := cniPod(meta)
	return inBackground(func() networkResult {
		ips, err := r.cfg.Network.Setup(ctx, id, meta.NetnsPath, pod)
		failpoint.Hit(failpoint.AfterCNIAdd)
		res := networkResult{err: err}
		for _, ip := range ips {
			res.ips = append(res.ips, ip.String())
		}
		return res
	})
}

func cniPod(meta *sandboxMeta) cni.Pod {
	p := cni.Pod{Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace, UID: meta.Metadata.Uid}
	for _, pm := range meta.Ports {
		if pm.HostPort <= 0 {
			continue
		}
		p.Ports = append(p.Ports, cni.PortMapping{
			HostPort:      pm.HostPort,
			ContainerPort: pm.ContainerPort,
			Protocol:      strings.ToLower(pm.Protocol.String()),
			HostIP:        pm.HostIp,
		})
	}
	return p
}

func (r *Runtime) sandboxSpecOpts(id string, meta *sandboxMeta, config *runtimeapi.PodSandboxConfig, image imagespec.ImageConfig) []oci.SpecOpts {
	sc := config.GetLinux().GetSecurityContext()
	opts := []oci.SpecOpts{
		oci.WithDefaultSpec(),
		oci.WithoutRunMount,
		specopts.WithoutDefaultSecuritySettings,
		withImageProcess(image),
		oci.WithRootFSReadonly(),
		oci.WithAnnotations(map[string]string{shimGroupAnnotation: id}),
		specopts.WithDefaultSandboxShares,
		specopts.WithPodOOMScoreAdj(r.oom.clamp(sandboxOOMScoreAdj)),
	}
	if pauseMountsOnly(config) {
		// The pause process reads no file: its container gets only the /proc and /dev mounts runc needs, not
		// /sys, /dev/pts, /dev/shm or /dev/mqueue, which runc would otherwise set up on every sandbox start. The
		// default masked and read-only paths stay (the process runs as root without seccomp; /proc/sysrq-trigger
		// must stay out of its reach). The app containers have mount namespaces of their own. Sysctls are
		// written through /proc, so a sandbox with sysctls keeps the default mounts.
		opts = append(opts, withoutMounts)
	}
	if meta.HostNetwork {
		// The host's network and UTS namespaces: the pod has the host's hostname, which runc cannot set.
		opts = append(opts, oci.WithHostNamespace(runtimespec.NetworkNamespace), oci.WithHostNamespace(runtimespec.UTSNamespace))
	} else if u := meta.Userns; u != nil {
		// A new user namespace, and in it a new network namespace runc makes (RunPodSandbox binds it at
		// NetnsPath once the task exists), owned by the pod's root.
		opts = append(opts, specopts.WithUserNamespace(specopts.IDMappings(u.GetUids()), specopts.IDMappings(u.GetGids()), ""),
			oci.WithLinuxNamespace(runtimespec.LinuxNamespace{Type: runtimespec.NetworkNamespace}),
			oci.WithHostname(meta.Hostname))
	} else {
		opts = append(opts, oci.WithLinuxNamespace(runtimespec.LinuxNamespace{Type: runtimespec.NetworkNamespace, Path: meta.NetnsPath}),
			oci.WithHostname(meta.Hostname))
	}
	if meta.HostPID {
		opts = append(opts, oci.WithHostNamespace(runtimespec.PIDNamespace))
	}
	if meta.HostIPC {
		opts = append(opts, oci.WithHostNamespace(runtimespec.IPCNamespace))
	}
	if sc.GetRunAsUser() != nil {
		gid := uint32(0)
		if sc.GetRunAsGroup() != nil {
			gid = uint32(sc.GetRunAsGroup().GetValue())
		}
		opts = append(opts, withNumericUser(uint32(sc.GetRunAsUser().GetValue()), gid))
	}
	if sc.GetPrivileged() {
		opts = append(opts, oci.WithPrivileged)
	}
	if len(config.GetLinux().GetSysctls()) > 0 {
		opts = append(opts, specopts.WithSysctls(config.GetLinux().GetSysctls()))
	}
	if meta.CgroupParent != "" {
		opts = append(opts, oci.WithCgroup(cgroupsPath(meta.CgroupParent, id)))
	}
	return opts
}

// pauseMountsOnly reports whether a sandbox's pause container mounts only /proc and /dev (sandboxSpecOpts), so
// that it can run from the shared view of the pause image (sandbox_rootfs.go).
func pauseMountsOnly(config *runtimeapi.PodSandboxConfig) bool {
	return len(config.GetLinux().GetSysctls()) == 0
}

// cgroupsPath is the container's cgroup under its parent: a path for cgroupfs, "slice:prefix:name" for systemd.
func cgroupsPath(parent, id string) string {
	if isSystemdSlice(parent) {
		return parent + ":" + systemdScopePrefix + ":" + id
	}
	return filepath.Join(parent, id)
}

// systemdScopePrefix names a container's scope under the systemd driver "cri-containerd-<id>.scope", as
// containerd's CRI plugin names it, so that tools that know upstream's layout find it.
const systemdScopePrefix = "cri-containerd"

// isSystemdSlice reports whether a cgroup parent is a systemd slice (the kubelet's systemd driver): runc
// then creates the container as a scope through systemd.
func isSystemdSlice(parent string) bool { return strings.HasSuffix(parent, ".slice") }

// runcOptions are the runc shim's options for a sandbox or container whose cgroup parent is parent: the
// systemd cgroup driver for a slice, as containerd's CRI plugin sets SystemdCgroup.
func runcOptions(parent string) *runcoptions.Options {
	return &runcoptions.Options{SystemdCgroup: isSystemdSlice(parent)}
}

// cgroupfsPath is where a cgroups path runc was given lies under a hierarchy's root: itself for cgroupfs, the
// nested slices and the scope for systemd's "parent.slice:prefix:id" ("a-b.slice" is "/a.slice/a-b.slice").
func cgroupfsPath(p string) string {
	parts := strings.Split(p, ":")
	if len(parts) != 3 || !isSystemdSlice(parts[0]) {
		return p
	}
	slice := strings.TrimSuffix(parts[0], ".slice")
	var dirs []string
	for i := 0; i < len(slice); i++ {
		if slice[i] == '-' {
			dirs = append(dirs, slice[:i]+".slice")
		}
	}
	dirs = append(dirs, parts[0], parts[1]+"-"+parts[2]+".scope")
	return "/" + strings.Join(dirs, "/")
}

// podMounts binds the sandbox's hosts, resolv.conf and hostname files and, when it has one, its /dev/shm into
// a container.
func podMounts(dir string, hostIPC, shm bool) []runtimespec.Mount {
	var ms []runtimespec.Mount
	for _, f := range []string{hostsFile, resolvFile, hostnameFile} {
		ms = append(ms, runtimespec.Mount{
			Destination: "/etc/" + f,
			Type:        "bind",
			Source:      filepath.Join(dir, f),
			Options:     []string{"rbind", "rprivate", "rw"},
		})
	}
	if !shm {
		return ms
	}
	return append(ms, runtimespec.Mount{
		Destination: devShm,
		Type:        "bind",
		Source:      shmDir(dir, hostIPC),
		Options:     []string{"rbind", "rprivate", "rw"},
	})
}

// withoutMounts keeps only the /proc and /dev mounts runc itself needs.
// withNumericUser runs the process as uid:gid as given. containerd's WithUserID would look the user up in
// the image's /etc/passwd, which needs the root filesystem's path when the spec is made: the pause image has
// no passwd, and its shared read-only root is set after the process's options.
func withNumericUser(uid, gid uint32) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
		if s.Process == nil {
			s.Process = &runtimespec.Process{}
		}
		s.Process.User.UID, s.Process.User.GID = uid, gid
		return nil
	}
}

func withoutMounts(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
	var keep []runtimespec.Mount
	for _, m := range s.Mounts {
		if m.Destination == "/proc" || m.Destination == "/dev" {
			keep = append(keep, m)
		}
	}
	s.Mounts = keep
	return nil
}
