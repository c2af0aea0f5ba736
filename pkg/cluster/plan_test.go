package cluster

import (
	"os"
	"path/filepath"
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

func TestPreflight(t *testing.T) {
	host := func(t *testing.T, files ...string) string {
		root := t.TempDir()
		for _, f := range files {
			path := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			data := ""
			if strings.HasSuffix(f, "filesystems") {
				data = "nodev\tsysfs\nnodev\toverlay\n"
			}
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	full := []string{"/proc/filesystems", "/proc/self/ns/cgroup", "/sys/fs/cgroup/freezer/tasks"}
	if err := preflight(host(t, full...), 0, sock); err != nil {
		t.Fatalf("a host with everything: %v", err)
	}
	for _, tc := range []struct {
		name  string
		files []string
		euid  int
		sock  string
		says  string
	}{
		{"not root", full, 1000, sock, "root"},
		{"no overlayfs", []string{"/proc/self/ns/cgroup", "/sys/fs/cgroup/freezer/tasks"}, 0, sock, "overlayfs"},
		{"no cgroup namespaces", []string{"/proc/filesystems", "/sys/fs/cgroup/freezer/tasks"}, 0, sock, "cgroup namespaces"},
		{"no freezer on cgroup v1", []string{"/proc/filesystems", "/proc/self/ns/cgroup"}, 0, sock, "freezer"},
		{"no containerd", full, 0, "/nonexistent.sock", "/nonexistent.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := preflight(host(t, tc.files...), tc.euid, tc.sock)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("preflight = %v, want an error naming %q", err, tc.says)
			}
		})
	}
	if err := preflight(host(t, "/proc/filesystems", "/proc/self/ns/cgroup", "/sys/fs/cgroup/cgroup.controllers"), 0, sock); err != nil {
		t.Fatalf("cgroup v2 needs no freezer directory: %v", err)
	}
}
