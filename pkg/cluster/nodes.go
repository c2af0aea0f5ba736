package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nodeagent/kubelet/pkg/cgroups"
	"github.com/nodeagent/kubelet/pkg/cluster/nodeinit"
)

// nodeArgs are the node's PID 1 arguments (see cmd/nodeinit).
func nodeArgs(p *Plan, n NodePlan, gracePeriod time.Duration) []string {
	args := []string{nodeinit.Bin + "/nodeinit",
		"--name", n.Name, "--ip", n.IP.String(), "--gateway", p.Gateway.String()}
	if n.ControlPlane {
		var names []string
		for _, o := range p.Nodes {
			names = append(names, o.Name)
		}
		args = append(args, "--control-plane", "--nodes", strings.Join(names, ","), "--cluster-cidr", p.ClusterCIDR)
		if gracePeriod != 0 {
			args = append(args, "--node-monitor-grace-period", gracePeriod.String())
		}
	}
	return args
}

// nodeMounts are a node's mounts beyond the image: tmpfs for /run, /tmp and containerd's root (overlayfs
// cannot stack on the node's own overlay root), its cgroups (writable), the host's kernel modules read-only, and its kubeconfigs:
// the control plane sees every node's, a worker its own.
func nodeMounts(p *Plan, n NodePlan) []runtimespec.Mount {
	tmpfs := func(dst string) runtimespec.Mount {
		return runtimespec.Mount{Destination: dst, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=755"}}
	}
	ms := []runtimespec.Mount{tmpfs("/run"), tmpfs("/tmp"), tmpfs(nodeinit.ContainerdRoot),
		// The node's own cgroup namespace: its kubelet's pod cgroups nest under the node's cgroup.
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "rw"}},
	}
	if _, err := os.Stat("/lib/modules"); err == nil { // a kernel without modules has none
		ms = append(ms, runtimespec.Mount{Destination: "/lib/modules", Type: "bind", Source: "/lib/modules", Options: []string{"rbind", "ro"}})
	}
	if n.ControlPlane {
		ms = append(ms, runtimespec.Mount{Destination: nodeinit.Shared, Type: "bind", Source: filepath.Join(p.StateDir, "shared"), Options: []string{"rbind", "rw"}})
	} else {
		ms = append(ms, runtimespec.Mount{Destination: nodeinit.Own, Type: "bind", Source: filepath.Join(p.StateDir, "shared", n.Name), Options: []string{"rbind", "ro"}})
	}
	return ms
}

// withNoFileLimit lets a node's daemons open as many files as this process may (the default spec's 1024
// is too few for containerd and the kubelet).
func withNoFileLimit(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	s.Process.Rlimits = []runtimespec.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: l.Max, Soft: l.Max}}
	return nil
}

// startNode creates and starts the node's container: privileged, in its own cgroup, PID, mount, UTS and
// IPC namespaces and the network namespace at netnsPath, its output appended to its log file.
func startNode(ctx context.Context, client *containerd.Client, p *Plan, n NodePlan, image, netnsPath string, gracePeriod time.Duration) error {
	img, err := client.GetImage(ctx, image)
	if err != nil {
		return err
	}
	c, err := client.NewContainer(ctx, n.Name,
		containerd.WithImage(img),
		containerd.WithNewSnapshot(n.Name, img),
		containerd.WithContainerLabels(map[string]string{LabelCluster: p.Name, LabelNode: n.Name, LabelRole: role(n)}),
		containerd.WithNewSpec(
			oci.WithDefaultSpec(),
			oci.WithImageConfig(img),
			oci.WithProcessArgs(nodeArgs(p, n, gracePeriod)...),
			oci.WithHostname(n.Name),
			oci.WithPrivileged,
			oci.WithHostDevices,
			oci.WithAllDevicesAllowed,
			oci.WithLinuxNamespace(runtimespec.LinuxNamespace{Type: runtimespec.NetworkNamespace, Path: netnsPath}),
			oci.WithLinuxNamespace(runtimespec.LinuxNamespace{Type: runtimespec.CgroupNamespace}),
			oci.WithCgroup(n.CgroupsPath),
			oci.WithMounts(nodeMounts(p, n)),
			withNoFileLimit,
		),
	)
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	task, err := c.NewTask(ctx, cio.LogFile(nodeLog(p, n)))
	if err != nil {
		return fmt.Errorf("create node %s's task: %w", n.Name, err)
	}
	if err := task.Start(ctx); err != nil {
		return fmt.Errorf("start node %s: %w", n.Name, err)
	}
	return nil
}

func role(n NodePlan) string {
	if n.ControlPlane {
		return "control-plane"
	}
	return "worker"
}

// nodeLog is where a node's output (containerd's, the API server's and the kubelet's logs) goes.
func nodeLog(p *Plan, n NodePlan) string { return filepath.Join(p.StateDir, n.Name+".log") }

// clusterContainers lists the node containers of cluster name.
func clusterContainers(ctx context.Context, client *containerd.Client, name string) ([]containerd.Container, error) {
	return client.Containers(ctx, fmt.Sprintf("labels.%q==%s", LabelCluster, name))
}

// removeNode kills the node's task (every process in it), deletes it and the container with its snapshot.
func removeNode(ctx context.Context, c containerd.Container) error {
	task, err := c.Task(ctx, nil)
	if err == nil {
		_ = task.Resume(ctx) // a frozen task cannot be killed
		wait, werr := task.Wait(ctx)
		if kerr := task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll); kerr != nil && !errdefs.IsNotFound(kerr) {
			return fmt.Errorf("kill node %s: %w", c.ID(), kerr)
		}
		if werr == nil {
			select {
			case <-wait:
			case <-time.After(30 * time.Second):
				return fmt.Errorf("node %s did not stop", c.ID())
			}
		}
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete node %s's task: %w", c.ID(), err)
		}
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", c.ID(), err)
	}
	return nil
}

// Freeze pauses every process of a node (its cgroup frozen), as a hung or suspended machine; Thaw
// resumes them.
func Freeze(ctx context.Context, client *containerd.Client, node string, frozen bool) error {
	c, err := client.LoadContainer(ctx, node)
	if err != nil {
		return err
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return err
	}
	if !frozen {
		return task.Resume(ctx)
	}
	// runc gives up on a cgroup v1 freezer that stays FREEZING while the node's processes fork ("unable
	// to freeze") and thaws it again; a later try takes.
	for try := 1; ; try++ {
		if err = task.Pause(ctx); err == nil || try == 5 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// removeCgroups removes the cluster's cgroups left after its nodes (the kubelets' pod cgroups inside a
// node's are removed with it by runc; this takes the parent and anything a crash left).
func removeCgroups(p *Plan) error {
	var errs []error
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + Namespace)
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		roots = []string{"/sys/fs/cgroup/" + Namespace}
	}
	for _, root := range roots {
		for _, n := range p.Nodes {
			errs = append(errs, cgroups.RemoveDir(filepath.Join(root, filepath.Base(n.CgroupsPath))))
		}
		_ = os.Remove(root) // only when empty: another cluster may be up
	}
	return errors.Join(errs...)
}
