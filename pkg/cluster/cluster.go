package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Options are what up needs beyond the plan.
type Options struct {
	ContainerdAddress string // the host containerd's socket
	Sources           ImageSources
	// NodeMonitorGracePeriod is passed to the control plane's API server or controller manager (40 s if 0).
	NodeMonitorGracePeriod time.Duration
	// ControlPlaneScript is hack/control-plane.sh, which runs a plan's host control plane.
	ControlPlaneScript string
	// ReadyTimeout bounds the wait for every node to be Ready.
	ReadyTimeout time.Duration
	Out          io.Writer // progress
}

// Preflight says which kernel feature or host piece a cluster needs and this host lacks.
func Preflight(containerdAddress string) error {
	return preflight("/", os.Geteuid(), containerdAddress)
}

// preflight checks the host whose /proc and /sys are under root, for a process of user euid.
func preflight(root string, euid int, containerdAddress string) error {
	var missing []string
	at := func(p string) string { return filepath.Join(root, p) }
	if euid != 0 {
		missing = append(missing, "root (node containers are privileged and get their own network namespaces)")
	}
	if fs, err := os.ReadFile(at("/proc/filesystems")); err != nil || !strings.Contains(string(fs), "\toverlay\n") {
		missing = append(missing, "overlayfs (modprobe overlay): node images and each node's containerd use it")
	}
	if _, err := os.Stat(at("/proc/self/ns/cgroup")); err != nil {
		missing = append(missing, "cgroup namespaces (Linux 4.6 or later): each node gets its own")
	}
	if _, err := os.Stat(at("/sys/fs/cgroup/cgroup.controllers")); err != nil {
		if _, err := os.Stat(at("/sys/fs/cgroup/freezer")); err != nil {
			missing = append(missing, "the freezer cgroup controller (cgroup v1): freezing a node needs it")
		}
	}
	if _, err := os.Stat(containerdAddress); err != nil {
		missing = append(missing, fmt.Sprintf("the host's containerd at %s (sudo make setup starts it)", containerdAddress))
	}
	if len(missing) > 0 {
		return fmt.Errorf("this host cannot run a cluster; it lacks: %s", strings.Join(missing, "; "))
	}
	return nil
}

// connect returns a client of the host's containerd whose calls are in the node containers' namespace.
func connect(address string) (*containerd.Client, error) {
	client, err := containerd.New(address, containerd.WithTimeout(10*time.Second), containerd.WithDefaultNamespace(Namespace))
	if err != nil {
		return nil, fmt.Errorf("connect to containerd at %s: %w", address, err)
	}
	return client, nil
}

// Up starts the cluster of the plan and waits until all its nodes are Ready. A cluster already up with
// the same nodes is left as it is; one partly there (a failed up) is an error that says to run down.
func Up(ctx context.Context, p *Plan, o Options) error {
	if err := Preflight(o.ContainerdAddress); err != nil {
		return err
	}
	client, err := connect(o.ContainerdAddress)
	if err != nil {
		return err
	}
	defer client.Close()
	cctx := namespaces.WithNamespace(ctx, Namespace)
	existing, err := clusterContainers(cctx, client, p.Name)
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		if len(existing) == len(p.Nodes) && allRunning(cctx, existing) {
			fmt.Fprintf(o.Out, "cluster %s is already up with %d nodes; admin kubeconfig: %s\n", p.Name, len(existing), AdminKubeconfig(p))
			return nil
		}
		return fmt.Errorf("cluster %s is partly there (%d of %d nodes); run down first", p.Name, len(existing), len(p.Nodes))
	}
	start := time.Now()
	if err := os.RemoveAll(filepath.Join(p.StateDir, "shared")); err != nil {
		return err
	}
	for _, n := range p.Nodes {
		if err := os.MkdirAll(filepath.Join(p.StateDir, "shared", n.Name), 0o700); err != nil {
			return err
		}
	}
	br, err := ensureBridge(p)
	if err != nil {
		return err
	}
	if p.HostControlPlane { // served on the bridge's address
		if err := startHostControlPlane(ctx, p, o.ControlPlaneScript, o.NodeMonitorGracePeriod, o.Out); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "control plane (kube-apiserver, kube-controller-manager, kube-scheduler) up on %s (%v)\n",
			p.Gateway, time.Since(start).Round(time.Millisecond))
	}
	// Another cluster's up at the same time would build the same image, or prune this one before its
	// containers use it: one up at a time from here until the node containers exist.
	unlock, err := lockNodeImages(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	image, err := EnsureNodeImage(cctx, client, o.Sources)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "node image %s ready (%v)\n", image, time.Since(start).Round(time.Millisecond))
	for _, n := range p.Nodes {
		path, err := attachNode(p, n, br)
		if err != nil {
			return err
		}
		if err := startNode(cctx, client, p, n, image, path, o.NodeMonitorGracePeriod); err != nil {
			return err
		}
	}
	unlock()
	fmt.Fprintf(o.Out, "%d node containers started (%v)\n", len(p.Nodes), time.Since(start).Round(time.Millisecond))
	if err := waitReady(cctx, client, p, o); err != nil {
		return err
	}
	// A Ready node has its pod CIDR (its network is ready only with one): route between them.
	if routed, err := SyncRoutes(cctx, p); err != nil || routed != len(p.Nodes) {
		return fmt.Errorf("routes between the nodes' pod networks (%d of %d nodes with a pod CIDR): %v", routed, len(p.Nodes), err)
	}
	fmt.Fprintf(o.Out, "cluster %s: %d nodes Ready in %v\nkubectl --kubeconfig %s get nodes\n", p.Name, len(p.Nodes),
		time.Since(start).Round(100*time.Millisecond), AdminKubeconfig(p))
	return nil
}

// stoppedNode names a node of the plan whose container's task has stopped, or is "".
func stoppedNode(ctx context.Context, client *containerd.Client, p *Plan) string {
	for _, n := range p.Nodes {
		c, err := client.LoadContainer(ctx, n.Name)
		if err != nil {
			continue
		}
		if t, err := c.Task(ctx, nil); err == nil {
			if st, err := t.Status(ctx); err == nil && st.Status == containerd.Stopped {
				return n.Name
			}
		}
	}
	return ""
}

func allRunning(ctx context.Context, cs []containerd.Container) bool {
	for _, c := range cs {
		t, err := c.Task(ctx, nil)
		if err != nil {
			return false
		}
		st, err := t.Status(ctx)
		if err != nil || st.Status != containerd.Running {
			return false
		}
	}
	return true
}

// AdminKubeconfig is where the control plane writes the cluster's admin kubeconfig on the host.
func AdminKubeconfig(p *Plan) string { return filepath.Join(p.StateDir, "shared", "admin.kubeconfig") }

// NodeKubeconfig is where the control plane writes a node's own kubeconfig on the host.
func NodeKubeconfig(p *Plan, node string) string {
	return filepath.Join(p.StateDir, "shared", node, "kubeconfig")
}

// AdminClient returns a client of the cluster's API server as its admin.
func AdminClient(p *Plan) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", AdminKubeconfig(p))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// waitReady waits until every node is Ready, and stops at once when a node container has stopped (one of
// its daemons ended: its log says which and why).
func waitReady(ctx context.Context, client *containerd.Client, p *Plan, o Options) error {
	timeout := o.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		last = readyNodes(ctx, p)
		if last == nil {
			return nil
		}
		if stopped := stoppedNode(ctx, client, p); stopped != "" {
			n, _ := p.Node(stopped)
			return fmt.Errorf("cluster %s: node %s stopped before it was Ready; its log: %s", p.Name, stopped, nodeLog(p, n))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("cluster %s: nodes not Ready after %v: %v (node logs: %s/*.log)", p.Name, timeout, last, p.StateDir)
}

func readyNodes(ctx context.Context, p *Plan) error {
	client, err := AdminClient(p)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := client.CoreV1().Nodes().List(rctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready[n.Name] = true
			}
		}
	}
	var notReady []string
	for _, n := range p.Nodes {
		if !ready[n.Name] {
			notReady = append(notReady, n.Name)
		}
	}
	if len(notReady) > 0 {
		return fmt.Errorf("not Ready: %s", strings.Join(notReady, ", "))
	}
	return nil
}

// Down removes everything cluster p made: its node containers (every process in them), their snapshots,
// network namespaces, veths, a host control plane's processes, the bridge, the cgroups and the state
// directory. It is safe to repeat and
// after a failed up.
func Down(ctx context.Context, p *Plan, containerdAddress string) error {
	var errs []error
	if _, err := os.Stat(containerdAddress); err == nil {
		client, err := connect(containerdAddress)
		if err != nil {
			return err
		}
		defer client.Close()
		cctx := namespaces.WithNamespace(ctx, Namespace)
		cs, err := clusterContainers(cctx, client, p.Name)
		if err != nil {
			return err
		}
		for _, c := range cs {
			errs = append(errs, removeNode(cctx, c))
		}
	}
	for _, n := range p.Nodes {
		errs = append(errs, detachNode(n))
	}
	errs = append(errs, stopHostControlPlane(p), removeBridge(p), removeCgroups(p))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.RemoveAll(p.StateDir)
}
