package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/nodeagent/kubelet/pkg/cluster"
)

// benchCluster measures `nodecluster up 3` to three Ready nodes, cold (the node image built) and warm (the
// image cached), beside the part of it that is starting the node containers; then the memory of an idle
// node by component (kubelet, containerd, shims, the API server on the control plane); then up 3 with
// upstream's control plane on the host, and that control plane's memory.
func benchCluster(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	bin := fs.String("bin-dir", "bin", "where make build put nodecluster, kubelet and apiserver")
	idle := fs.Duration("idle", 20*time.Second, "how long the nodes idle before their memory is read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tool, err := filepath.Abs(filepath.Join(*bin, "nodecluster"))
	if err != nil {
		return err
	}
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, tool, append([]string{"--name", "bench", "--subnet", "172.30.8.0/24"}, args...)...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("nodecluster %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := run("down"); err != nil {
		return err
	}
	defer run("down") //nolint:errcheck
	// Cold: no node image is there, it is built and imported; warm: it is.
	if err := removeNodeImages(ctx); err != nil {
		return err
	}
	for _, round := range []string{"cold", "warm"} {
		start := time.Now()
		out, err := run("up", "3")
		if err != nil {
			return err
		}
		total := time.Since(start)
		st := stageTimes(out)
		figure("cluster_up3_"+round+"_to_ready", total.Seconds(), "s")
		figure("cluster_up3_"+round+"_image", st.image.Seconds(), "s")
		figure("cluster_up3_"+round+"_floor_containers_started", (st.containers - st.image).Seconds(), "s")
		if round == "cold" {
			if _, err := run("down"); err != nil {
				return err
			}
		}
	}
	time.Sleep(*idle)
	p, err := cluster.NewPlan("bench", 3, "172.30.8.0/24", cluster.DefaultClusterCIDR)
	if err != nil {
		return err
	}
	for _, n := range p.Nodes {
		parts, err := nodeRSS(n)
		if err != nil {
			return err
		}
		total := 0.0
		for _, comp := range []string{"kubelet", "containerd", "shims", "apiserver", "other"} {
			if v, ok := parts[comp]; ok {
				figure(fmt.Sprintf("cluster_idle_%s_rss_%s", strings.ReplaceAll(n.Name, "-", "_"), comp), v, "MiB")
				total += v
			}
		}
		figure(fmt.Sprintf("cluster_idle_%s_rss_total", strings.ReplaceAll(n.Name, "-", "_")), total, "MiB")
	}

	// Upstream's control plane on the host, the node image cached: up 3 to Ready beside the part of it that
	// is starting the control plane, and the control plane's memory once idle.
	if _, err := run("down"); err != nil {
		return err
	}
	start := time.Now()
	out, err := run("--control-plane", cluster.ControlPlaneKubeAPIServer, "up", "3")
	if err != nil {
		return err
	}
	total := time.Since(start)
	st := stageTimes(out)
	figure("cluster_up3_kubeapiserver_to_ready", total.Seconds(), "s")
	figure("cluster_up3_kubeapiserver_floor_control_plane_started", st.controlPlane.Seconds(), "s")
	time.Sleep(*idle)
	sum := 0.0
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		pid, err := os.ReadFile(filepath.Join(cluster.ControlPlaneDir(p), "run", name+".pid"))
		if err != nil {
			return err
		}
		v := statusKiB(strings.TrimSpace(string(pid)), "VmRSS:") / 1024
		figure("cluster_kubeapiserver_idle_rss_"+strings.ReplaceAll(name, "-", "_"), v, "MiB")
		sum += v
	}
	figure("cluster_kubeapiserver_idle_rss_control_plane_total", sum, "MiB")
	return nil
}

// stages are the times up prints for its steps, each since it began.
type stages struct{ image, controlPlane, containers time.Duration }

var stageRE = regexp.MustCompile(`\(([0-9.]+m?s)\)`)

// stageTimes reads "node image ... ready (T)", "control plane ... up on ... (T)" and "3 node containers
// started (T)" from up's output.
func stageTimes(out string) (st stages) {
	for _, line := range strings.Split(out, "\n") {
		m := stageRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		d, _ := time.ParseDuration(m[1])
		switch {
		case strings.HasPrefix(line, "node image"):
			st.image = d
		case strings.HasPrefix(line, "control plane ("):
			st.controlPlane = d
		case strings.Contains(line, "node containers started"):
			st.containers = d
		}
	}
	return st
}

// nodeRSS sums the resident memory of a node's processes by component, from the processes of its cgroup
// tree (memory controller).
func nodeRSS(n cluster.NodePlan) (map[string]float64, error) {
	root := "/sys/fs/cgroup/memory" + n.CgroupsPath
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		root = "/sys/fs/cgroup" + n.CgroupsPath
	}
	parts := map[string]float64{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			pid := strings.TrimSpace(sc.Text())
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			rss := statusKiB(pid, "VmRSS:")
			name := strings.TrimSpace(string(comm))
			switch {
			case name == "kubelet", name == "containerd", name == "apiserver":
			case strings.HasPrefix(name, "containerd-shim"):
				name = "shims"
			default:
				name = "other"
			}
			parts[name] += rss / 1024
		}
		return nil
	})
	return parts, err
}

func statusKiB(pid, field string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				v, _ := strconv.ParseFloat(f[1], 64)
				return v
			}
		}
	}
	return 0
}

// removeNodeImages deletes the node images from the host's containerd (a cache: up builds them again).
func removeNodeImages(ctx context.Context) error {
	client, err := containerd.New("/run/nodeagent/containerd/containerd.sock")
	if err != nil {
		return err
	}
	defer client.Close()
	ctx = namespaces.WithNamespace(ctx, cluster.Namespace)
	imgs, err := client.ImageService().List(ctx, `name~="^localhost/nodeagent-node:"`)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if err := client.ImageService().Delete(ctx, img.Name, images.SynchronousDelete()); err != nil {
			return err
		}
	}
	return nil
}
