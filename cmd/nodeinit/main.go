package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/nodeagent/kubelet/pkg/cluster/nodeinit"
)

func main() {
	var cfg nodeinit.Config
	var nodes string
	flag.StringVar(&cfg.Name, "name", "", "the node's name")
	flag.StringVar(&cfg.IP, "ip", "", "the node's address")
	flag.StringVar(&cfg.Gateway, "gateway", "", "the bridge's address")
	flag.BoolVar(&cfg.ControlPlane, "control-plane", false, "run the API server")
	flag.StringVar(&nodes, "nodes", "", "the cluster's nodes, comma-separated (control plane): a kubeconfig is written for each")
	flag.StringVar(&cfg.ClusterCIDR, "cluster-cidr", "10.244.0.0/16", "the pods' network (control plane)")
	flag.DurationVar(&cfg.GracePeriod, "node-monitor-grace-period", 0, "the API server's node monitor grace period")
	flag.Parse()
	if nodes != "" {
		cfg.Nodes = strings.Split(nodes, ",")
	}
	if cfg.Name == "" || cfg.IP == "" {
		fmt.Fprintln(os.Stderr, "nodeinit: --name and --ip are required")
		os.Exit(2)
	}
	if err := nodeinit.Run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "nodeinit:", err)
		os.Exit(1)
	}
}
