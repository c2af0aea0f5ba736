package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/nodeagent/kubelet/pkg/cluster"
	"github.com/nodeagent/kubelet/pkg/cni"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "nodecluster:", err)
		os.Exit(1)
	}
}

func usage() error {
	return fmt.Errorf("usage: nodecluster [flags] up [N] | down | freeze NODE | thaw NODE | partition NODE | heal NODE | kubeconfig")
}

func run(args []string) error {
	fs := flag.NewFlagSet("nodecluster", flag.ContinueOnError)
	name := fs.String("name", cluster.DefaultName, "the cluster's name")
	subnet := fs.String("subnet", cluster.DefaultSubnet, "the nodes' network (the host's bridge takes its first address)")
	clusterCIDR := fs.String("cluster-cidr", cluster.DefaultClusterCIDR, "the pods' network, cut into one /24 per node")
	address := fs.String("containerd-address", "/run/nodeagent/containerd/containerd.sock", "the host containerd's socket")
	binDir := fs.String("bin-dir", defaultBinDir(), "where kubelet, apiserver and nodecluster are (make build)")
	ctrDir := fs.String("containerd-bin-dir", defaultContainerdDir(), "where containerd, its shim, ctr and runc are (make setup)")
	cniDir := fs.String("cni-bin-dir", "/usr/lib/cni", "where the CNI plugins are")
	imagesDir := fs.String("images-dir", "/var/lib/nodeagent/images", "where pause.tar and busybox.tar are (make setup)")
	grace := fs.Duration("node-monitor-grace-period", 0, "how long a node that stopped renewing its Lease stays Ready (40s if 0)")
	controlPlane := fs.String("control-plane", cluster.ControlPlaneLightweight, "the control plane: "+cluster.ControlPlaneLightweight+
		" (the project's API server on the first node) or "+cluster.ControlPlaneKubeAPIServer+
		" (etcd, kube-apiserver, kube-controller-manager and kube-scheduler on the host, by --control-plane-script)")
	cpScript := fs.String("control-plane-script", "", "hack/control-plane.sh (default: beside the binaries' directory, in ../hack)")
	timeout := fs.Duration("wait", 2*time.Minute, "how long up waits for the nodes to be Ready")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch rest[0] {
	case "up":
		n := 3
		if len(rest) > 1 {
			v, err := strconv.Atoi(rest[1])
			if err != nil {
				return fmt.Errorf("up %q: want a number of nodes", rest[1])
			}
			n = v
		}
		p, err := cluster.NewPlan(*name, n, *subnet, *clusterCIDR)
		if err != nil {
			return err
		}
		if err := p.UseControlPlane(*controlPlane); err != nil {
			return err
		}
		if *cpScript == "" {
			*cpScript = filepath.Join(filepath.Dir(*binDir), "hack", "control-plane.sh")
		}
		return cluster.Up(ctx, p, cluster.Options{ContainerdAddress: *address, NodeMonitorGracePeriod: *grace,
			ControlPlaneScript: *cpScript, ReadyTimeout: *timeout, Out: os.Stdout,
			Sources: cluster.ImageSources{BinDir: *binDir, ContainerdDir: *ctrDir, CNIBinDir: *cniDir, ImagesDir: *imagesDir}})
	case "down":
		p, err := cluster.NewPlan(*name, discoverNodes(*name), *subnet, *clusterCIDR)
		if err != nil {
			return err
		}
		if err := cluster.Down(ctx, p, *address); err != nil {
			return err
		}
		fmt.Printf("cluster %s removed\n", *name)
		return nil
	case "freeze", "thaw", "partition", "heal":
		if len(rest) != 2 {
			return usage()
		}
		p, err := cluster.NewPlan(*name, discoverNodes(*name), *subnet, *clusterCIDR)
		if err != nil {
			return err
		}
		node, ok := p.Node(rest[1])
		if !ok {
			return fmt.Errorf("cluster %s has no node %q", *name, rest[1])
		}
		if rest[0] == "partition" || rest[0] == "heal" {
			if err := cluster.SetLink(p, node, rest[0] == "heal"); err != nil || rest[0] == "partition" {
				return err
			}
			_, err := cluster.SyncRoutes(ctx, p) // the link lost its routes when it went down
			return err
		}
		client, err := containerd.New(*address)
		if err != nil {
			return err
		}
		defer client.Close()
		return cluster.Freeze(namespaces.WithNamespace(ctx, cluster.Namespace), client, node.Name, rest[0] == "freeze")
	case "kubeconfig":
		p, err := cluster.NewPlan(*name, 1, *subnet, *clusterCIDR)
		if err != nil {
			return err
		}
		fmt.Println(cluster.AdminKubeconfig(p))
		return nil
	}
	return usage()
}

// discoverNodes is how many nodes cluster name has: the highest node number among its network namespaces
// (1 when none is left, so that down still removes the bridge and state).
func discoverNodes(name string) int {
	max := 1
	paths, _ := filepath.Glob(filepath.Join(cni.NetnsDir, "nodeagent-"+name+"-node*"))
	var found []int
	for _, p := range paths {
		if v, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "nodeagent-"+name+"-node")); err == nil {
			found = append(found, v)
		}
	}
	sort.Ints(found)
	if len(found) > 0 && found[len(found)-1] > max {
		max = found[len(found)-1]
	}
	return min(max, cluster.MaxNodes)
}

func defaultBinDir() string {
	if exe, err := os.Executable(); err == nil {
		return filepath.Dir(exe)
	}
	return "bin"
}

// defaultContainerdDir is the newest containerd lane make setup built, else Debian's.
func defaultContainerdDir() string {
	dirs, _ := filepath.Glob("/var/lib/nodeagent/containerd-*/bin")
	sort.Strings(dirs)
	if len(dirs) > 0 {
		return dirs[len(dirs)-1]
	}
	return "/usr/bin"
}
