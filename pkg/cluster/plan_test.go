package cluster

import (
	"strings"
	"testing"
)

func TestNewPlan(t *testing.T) {
	p, err := NewPlan("kind", 3, DefaultSubnet, DefaultClusterCIDR)
	if err != nil {
		t.Fatal(err)
	}
	if p.Gateway.String() != "172.30.0.1" || len(p.Nodes) != 3 {
		t.Fatalf("plan %+v", p)
	}
	want := []string{"kind-node1 172.30.0.10 true", "kind-node2 172.30.0.11 false", "kind-node3 172.30.0.12 false"}
	for i, n := range p.Nodes {
		got := n.Name + " " + n.IP.String() + " " + map[bool]string{true: "true", false: "false"}[n.ControlPlane]
		if got != want[i] {
			t.Errorf("node %d: %s, want %s", i, got, want[i])
		}
		if len(n.HostVeth) > 15 || len(p.Bridge) > 15 {
			t.Errorf("link names too long: %q %q", n.HostVeth, p.Bridge)
		}
	}
	other, _ := NewPlan("other", 1, "172.31.0.0/24", DefaultClusterCIDR)
	if other.Bridge == p.Bridge || other.Nodes[0].HostVeth == p.Nodes[0].HostVeth || other.Nodes[0].Netns == p.Nodes[0].Netns {
		t.Fatal("two clusters share link or namespace names")
	}
	for _, bad := range []struct {
		name, subnet, cidr string
		n                  int
		says               string
	}{
		{"Kind", DefaultSubnet, DefaultClusterCIDR, 3, "cluster name"},
		{"a-very-long-cluster-name", DefaultSubnet, DefaultClusterCIDR, 3, "cluster name"},
		{"kind", DefaultSubnet, DefaultClusterCIDR, 0, "nodes"},
		{"kind", DefaultSubnet, DefaultClusterCIDR, MaxNodes + 1, "nodes"},
		{"kind", "172.30.0.0/25", DefaultClusterCIDR, 3, "/24"},
		{"kind", "fd00::/64", DefaultClusterCIDR, 3, "IPv4"},
		{"kind", "10.244.3.0/24", DefaultClusterCIDR, 3, "overlaps"},
	} {
		if _, err := NewPlan(bad.name, bad.n, bad.subnet, bad.cidr); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("NewPlan(%q, %d, %q, %q) = %v, want an error saying %q", bad.name, bad.n, bad.subnet, bad.cidr, err, bad.says)
		}
	}
}
