package cluster

import (
	"fmt"
	"hash/fnv"
	"net"
	"regexp"
)

// Namespace is the host containerd namespace of node containers.
const Namespace = "nodeagent-cluster"

// Defaults of a cluster.
const (
	DefaultName        = "kind"
	DefaultSubnet      = "172.30.0.0/24"
	DefaultClusterCIDR = "10.244.0.0/16"
	// LabelCluster and LabelNode label node containers with their cluster and node name.
	LabelCluster = "nodeagent.io/cluster"
	LabelNode    = "nodeagent.io/node"
	LabelRole    = "nodeagent.io/role"
	// StateRoot holds each cluster's state directory (kubeconfigs, node logs).
	StateRoot = "/var/lib/nodeagent/cluster"
	// MaxNodes bounds a cluster: the subnet's addresses .10 to .250.
	MaxNodes = 240
)

var validName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)

// Plan is what a cluster of N nodes is made of on the host.
type Plan struct {
	Name        string
	Subnet      *net.IPNet
	Gateway     net.IP // the bridge's address
	ClusterCIDR string
	Bridge      string // the bridge's link name
	StateDir    string
	Nodes       []NodePlan
	// HostControlPlane: the control plane is upstream's, on the host (UseControlPlane), not on node 1.
	HostControlPlane bool
}

// NodePlan is one node: its name, address, network namespace, host-side veth and cgroup.
type NodePlan struct {
	Name         string
	ControlPlane bool
	IP           net.IP
	Netns        string // the network namespace's name (ip netns)
	HostVeth     string
	CgroupsPath  string
}

// NewPlan returns the plan of cluster name with n nodes on subnet (a /24 or larger IPv4 network); the first
// node runs the control plane.
func NewPlan(name string, n int, subnet, clusterCIDR string) (*Plan, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("cluster name %q: want a lower-case letter, then up to 19 letters, digits or '-'", name)
	}
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("%d nodes: want 1 to %d", n, MaxNodes)
	}
	ip, sn, err := net.ParseCIDR(subnet)
	if err != nil || ip.To4() == nil {
		return nil, fmt.Errorf("subnet %q: want an IPv4 CIDR", subnet)
	}
	if ones, _ := sn.Mask.Size(); ones > 24 {
		return nil, fmt.Errorf("subnet %s: want a /24 or larger", sn)
	}
	if _, cc, err := net.ParseCIDR(clusterCIDR); err != nil {
		return nil, fmt.Errorf("cluster CIDR %q: %w", clusterCIDR, err)
	} else if cc.Contains(sn.IP) || sn.Contains(cc.IP) {
		return nil, fmt.Errorf("cluster CIDR %s overlaps the node subnet %s", cc, sn)
	}
	short := shortID(name)
	p := &Plan{Name: name, Subnet: sn, Gateway: offset(sn.IP, 1), ClusterCIDR: clusterCIDR,
		Bridge: "nc" + short, StateDir: StateRoot + "/" + name}
	for i := 1; i <= n; i++ {
		p.Nodes = append(p.Nodes, NodePlan{
			Name:         fmt.Sprintf("%s-node%d", name, i),
			ControlPlane: i == 1,
			IP:           offset(sn.IP, 9+i),
			Netns:        fmt.Sprintf("nodeagent-%s-node%d", name, i),
			HostVeth:     fmt.Sprintf("nc%s-%d", short, i),
			CgroupsPath:  fmt.Sprintf("/%s/%s-node%d", Namespace, name, i),
		})
	}
	return p, nil
}

// Node returns the node named name.
func (p *Plan) Node(name string) (NodePlan, bool) {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return NodePlan{}, false
}

// shortID is 6 hex digits of the cluster name, for link names (15 characters at most).
func shortID(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("%06x", h.Sum32()&0xffffff)
}

func offset(ip net.IP, n int) net.IP {
	v4 := ip.To4()
	out := make(net.IP, 4)
	copy(out, v4)
	v := uint32(out[0])<<24 | uint32(out[1])<<16 | uint32(out[2])<<8 | uint32(out[3])
	v += uint32(n)
	return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)).To4()
}
