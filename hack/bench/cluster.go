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
// node by component (kubelet, containerd, shims, the API server on the control plane).
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
		image, containers := stageTimes(out)
		figure("cluster_up3_"+round+"_to_ready", total.Seconds(), "s")
		figure("cluster_up3_"+round+"_image", image.Seconds(), "s")
		figure("cluster_up3_"+round+"_floor_containers_started", (containers - image).Seconds(), "s")
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
	return nil
}

var stageRE = regexp.MustCompile(`\(([0-9.]+m?s)\)`)

// stageTimes reads "node image ... ready (T)" and "3 node containers started (T)" from up's output.
func stageTimes(out string) (image, containers time.Duration) {
	for _, line := range strings.Split(out, "\n") {
		m := stageRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		d, _ := time.ParseDuration(m[1])
		switch {
		case strings.HasPrefix(line, "node image"):
			image = d
		case strings.Contains(line, "node containers started"):
			containers = d
		}
	}
	return image, containers
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
