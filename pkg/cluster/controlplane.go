package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodeagent/kubelet/internal/atomicfile"
)

// The control planes a cluster can have.
const (
	// ControlPlaneLightweight is the project's API server on the first node (node lifecycle, pod CIDRs and
	// placement built in).
	ControlPlaneLightweight = "lightweight"
	// ControlPlaneKubeAPIServer is upstream's: etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler as processes on the host (hack/control-plane.sh), serving on the bridge's address; every
	// node is then a worker.
	ControlPlaneKubeAPIServer = "kube-apiserver"
)

// DefaultNodeMonitorGracePeriod is how long a node that stopped renewing its Lease stays Ready: the Lease
// duration (kube-controller-manager's default is 50 s since 1.32).
const DefaultNodeMonitorGracePeriod = 40 * time.Second

// controlPlaneProcs are the host control plane's processes, in the order they are stopped.
var controlPlaneProcs = []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"}

// ControlPlaneDir is where the host control plane of cluster p keeps its data, certificates, logs and PIDs.
func ControlPlaneDir(p *Plan) string { return filepath.Join(p.StateDir, "control-plane") }

// UseControlPlane sets which control plane the plan's cluster runs; with the host's, no node runs one.
func (p *Plan) UseControlPlane(kind string) error {
	switch kind {
	case "", ControlPlaneLightweight:
		return nil
	case ControlPlaneKubeAPIServer:
		for i := range p.Nodes {
			p.Nodes[i].ControlPlane = false
		}
		p.HostControlPlane = true
		return nil
	}
	return fmt.Errorf("control plane %q: want %s or %s", kind, ControlPlaneLightweight, ControlPlaneKubeAPIServer)
}

// controlPlaneEnv is the environment hack/control-plane.sh runs with for cluster p: its own directory,
// kube-apiserver on the bridge's address reaching kubelets by their InternalIP, and the controller manager
// cutting p's cluster CIDR into a /24 per node and marking a node Unknown after grace.
func controlPlaneEnv(p *Plan, grace time.Duration) ([]string, error) {
	if grace == 0 {
		grace = DefaultNodeMonitorGracePeriod
	}
	if grace < 0 {
		return nil, fmt.Errorf("node monitor grace period %v: kube-controller-manager's node lifecycle cannot be turned off", grace)
	}
	return []string{
		"CONTROL_PLANE_DIR=" + ControlPlaneDir(p),
		"CONTROL_PLANE_ADDRESS=" + p.Gateway.String(),
		"CONTROL_PLANE_KUBELET_ADDRESS_TYPES=InternalIP",
		"CONTROL_PLANE_CONTROLLERS=1",
		"CONTROL_PLANE_CLUSTER_CIDR=" + p.ClusterCIDR,
		"CONTROL_PLANE_NODE_CIDR_MASK_SIZE=24",
		"CONTROL_PLANE_NODE_MONITOR_GRACE_PERIOD=" + grace.String(),
		"CONTROL_PLANE_NODE=" + p.Nodes[0].Name,
	}, nil
}

// startHostControlPlane starts the host control plane of cluster p with script (hack/control-plane.sh) and
// puts the admin kubeconfig and each node's (its own system:node certificate) where the nodes and the user
// find them.
func startHostControlPlane(ctx context.Context, p *Plan, script string, grace time.Duration, out io.Writer) error {
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("the control plane script: %w (--control-plane-script names it)", err)
	}
	env, err := controlPlaneEnv(p, grace)
	if err != nil {
		return err
	}
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, script, args...)
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, io.MultiWriter(&stderr, out)
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s %s: %w: %s", script, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(stdout.String()), nil
	}
	if _, err := run("start"); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(ControlPlaneDir(p), "admin.kubeconfig"), AdminKubeconfig(p)); err != nil {
		return err
	}
	for _, n := range p.Nodes {
		path, err := run("node-kubeconfig", n.Name)
		if err != nil {
			return err
		}
		if err := copyFile(path, NodeKubeconfig(p, n.Name)); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies a kubeconfig (readable by root only) from src to dst.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return atomicfile.Write(dst, b, 0o600)
}

// stopHostControlPlane stops the processes of cluster p's host control plane, each by the PID it recorded
// and only while that process is still the one started for p (its command line names p's directory):
// SIGTERM, then SIGKILL after 10 s. Nothing recorded is nothing to do.
func stopHostControlPlane(p *Plan) error {
	dir := ControlPlaneDir(p)
	var errs []error
	for _, name := range controlPlaneProcs {
		pidFile := filepath.Join(dir, "run", name+".pid")
		pid, ok := recordedProcess(pidFile, name, dir)
		if !ok {
			continue
		}
		if err := stopProcess(pid, 10*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop %s (pid %d): %w", name, pid, err))
			continue
		}
		_ = os.Remove(pidFile)
	}
	return errors.Join(errs...)
}

// recordedProcess reads the PID in pidFile and says whether that process is name started for dir.
func recordedProcess(pidFile, name, dir string) (int, bool) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, false
	}
	return pid, isControlPlaneProcess(cmdline, name, dir)
}

// isControlPlaneProcess says whether a /proc cmdline (NUL-separated) is name's, started for directory dir.
func isControlPlaneProcess(cmdline []byte, name, dir string) bool {
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) == 0 || filepath.Base(args[0]) != name {
		return false
	}
	for _, a := range args[1:] {
		if strings.Contains(a, dir+"/") || strings.HasSuffix(a, dir) {
			return true
		}
	}
	return false
}

// stopProcess sends SIGTERM to pid and waits up to timeout for it to go, then sends SIGKILL.
func stopProcess(pid int, timeout time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	for range 50 {
		if !alive(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("still there after SIGKILL")
}

// alive says whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may hold spaces.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
