package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestUseControlPlane(t *testing.T) {
	for _, tc := range []struct {
		kind             string
		node1ControlPane bool
		host             bool
		err              string
	}{
		{"", true, false, ""},
		{ControlPlaneLightweight, true, false, ""},
		{ControlPlaneKubeAPIServer, false, true, ""},
		{"kubeadm", true, false, `control plane "kubeadm": want lightweight or kube-apiserver`},
	} {
		p, _ := NewPlan("kind", 3, DefaultSubnet, DefaultClusterCIDR)
		err := p.UseControlPlane(tc.kind)
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%q: error %v, want %q", tc.kind, err, tc.err)
			continue
		}
		if p.Nodes[0].ControlPlane != tc.node1ControlPane || p.HostControlPlane != tc.host || p.Nodes[1].ControlPlane {
			t.Errorf("%q: node1 control plane %v, host %v", tc.kind, p.Nodes[0].ControlPlane, p.HostControlPlane)
		}
	}
}

func TestControlPlaneEnv(t *testing.T) {
	p, _ := NewPlan("kind", 3, "172.30.5.0/24", "10.200.0.0/16")
	env, err := controlPlaneEnv(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CONTROL_PLANE_DIR=/var/lib/nodeagent/cluster/kind/control-plane",
		"CONTROL_PLANE_ADDRESS=172.30.5.1", // the bridge: the nodes reach it, the host too
		"CONTROL_PLANE_KUBELET_ADDRESS_TYPES=InternalIP",
		"CONTROL_PLANE_CONTROLLERS=1",
		"CONTROL_PLANE_CLUSTER_CIDR=10.200.0.0/16",
		"CONTROL_PLANE_NODE_CIDR_MASK_SIZE=24",
		"CONTROL_PLANE_NODE_MONITOR_GRACE_PERIOD=40s",
	} {
		if !slices.Contains(env, want) {
			t.Errorf("env %v lacks %s", env, want)
		}
	}
	if env, _ := controlPlaneEnv(p, 12*time.Second); !slices.Contains(env, "CONTROL_PLANE_NODE_MONITOR_GRACE_PERIOD=12s") {
		t.Errorf("a 12 s grace period: %v", env)
	}
	if _, err := controlPlaneEnv(p, -1); err == nil || !strings.Contains(err.Error(), "cannot be turned off") {
		t.Errorf("a negative grace period: %v", err)
	}
}

func TestIsControlPlaneProcess(t *testing.T) {
	dir := "/var/lib/nodeagent/cluster/kind/control-plane"
	cmd := func(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }
	for _, tc := range []struct {
		cmdline []byte
		name    string
		want    bool
	}{
		{cmd("/var/lib/nodeagent/bin/kube-apiserver", "--audit-log-path="+dir+"/log/audit.log"), "kube-apiserver", true},
		{cmd("etcd", "--name", "nodeagent", "--data-dir", dir+"/etcd"), "etcd", true},
		{cmd("/var/lib/nodeagent/bin/kube-apiserver", "--audit-log-path=/var/lib/nodeagent/control-plane/log/audit.log"), "kube-apiserver", false},
		{cmd("/usr/bin/vim", dir+"/etcd"), "etcd", false},             // another program naming the directory
		{cmd("etcd", "--data-dir", dir+"-other/etcd"), "etcd", false}, // another cluster's
		{cmd("etcd", "--data-dir", "/var/lib/nodeagent/cluster/kind"), "etcd", false},
		{nil, "etcd", false},
	} {
		if got := isControlPlaneProcess(tc.cmdline, tc.name, dir); got != tc.want {
			t.Errorf("%q as %s: %v, want %v", tc.cmdline, tc.name, got, tc.want)
		}
	}
}

// stopHostControlPlane stops a process recorded for the plan and leaves one whose PID file names a process
// that is not the plan's (a PID reused by another program).
func TestStopHostControlPlane(t *testing.T) {
	p, _ := NewPlan("kind", 1, DefaultSubnet, DefaultClusterCIDR)
	p.StateDir = t.TempDir()
	dir := ControlPlaneDir(p)
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	// A stand-in for etcd: tail following a file in the directory, started with argv[0] "etcd".
	tail, err := exec.LookPath("tail")
	if err != nil {
		t.Skip("no tail binary")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ours := &exec.Cmd{Path: tail, Args: []string{"etcd", "-f", filepath.Join(dir, "etcd.log")}}
	if err := ours.Start(); err != nil {
		t.Fatal(err)
	}
	defer ours.Process.Kill()
	other := exec.Command(sleep, "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	waited := make(chan struct{})
	go func() { _ = ours.Wait(); close(waited) }()
	// Start returns once the exec is under way, before the kernel has set the new program's arguments: until
	// then /proc/<pid>/cmdline reads empty. A PID file names a process that is up, so wait for its arguments.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ours.Process.Pid))
		if strings.HasPrefix(string(b), "etcd\x00") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in's command line reads %q", b)
		}
	}
	write := func(name string, pid int) {
		if err := os.WriteFile(filepath.Join(run, name+".pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etcd", ours.Process.Pid)
	write("kube-apiserver", other.Process.Pid) // not a kube-apiserver: left alone
	if err := stopHostControlPlane(p); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
	case <-time.After(15 * time.Second):
		t.Fatal("the recorded etcd still runs")
	}
	if !alive(other.Process.Pid) {
		t.Error("a process that is not the plan's was stopped")
	}
	if _, err := os.Stat(filepath.Join(run, "etcd.pid")); !os.IsNotExist(err) {
		t.Errorf("etcd's PID file left: %v", err)
	}
	if err := stopHostControlPlane(p); err != nil { // again: nothing to do
		t.Fatal(err)
	}
}

// startHostControlPlane with a stand-in for hack/control-plane.sh: the admin's and each node's kubeconfig
// land where the user and the nodes read them, root's only; a missing script names the flag; a failing
// one's error carries what it said.
func TestStartHostControlPlane(t *testing.T) {
	p, _ := NewPlan("kind", 2, DefaultSubnet, DefaultClusterCIDR)
	if err := p.UseControlPlane(ControlPlaneKubeAPIServer); err != nil {
		t.Fatal(err)
	}
	p.StateDir = t.TempDir()
	for _, n := range p.Nodes {
		if err := os.MkdirAll(filepath.Join(p.StateDir, "shared", n.Name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(t.TempDir(), "control-plane.sh")
	write := func(body string) {
		if err := os.WriteFile(script, []byte("#!/bin/sh\nset -e\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	ctx := context.Background()

	if err := startHostControlPlane(ctx, p, filepath.Join(t.TempDir(), "missing.sh"), 0, &out); err == nil ||
		!strings.Contains(err.Error(), "--control-plane-script") {
		t.Errorf("a missing script: %v", err)
	}
	write("echo 'control-plane: etcd did not start' >&2; exit 1\n")
	if err := startHostControlPlane(ctx, p, script, 0, &out); err == nil || !strings.Contains(err.Error(), "etcd did not start") {
		t.Errorf("a failing script: %v", err)
	}
	if err := startHostControlPlane(ctx, p, script, -1, &out); err == nil {
		t.Error("a negative grace period was taken")
	}

	// The stand-in writes what the real script writes, in CONTROL_PLANE_DIR, and checks its settings.
	write(`[ "$CONTROL_PLANE_ADDRESS" = 172.30.0.1 ] && [ "$CONTROL_PLANE_CONTROLLERS" = 1 ] || exit 3
mkdir -p "$CONTROL_PLANE_DIR"
case "$1" in
start) echo admin > "$CONTROL_PLANE_DIR/admin.kubeconfig" ;;
node-kubeconfig) echo "node $2" > "$CONTROL_PLANE_DIR/node-$2.kubeconfig"; echo "$CONTROL_PLANE_DIR/node-$2.kubeconfig" ;;
esac
`)
	if err := startHostControlPlane(ctx, p, script, 0, &out); err != nil {
		t.Fatal(err)
	}
	check := func(path, want string) {
		t.Helper()
		b, err := os.ReadFile(path)
		fi, serr := os.Stat(path)
		if err != nil || serr != nil || strings.TrimSpace(string(b)) != want || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %q %v %v, want %q mode 0600", path, b, err, fi, want)
		}
	}
	check(AdminKubeconfig(p), "admin")
	for _, n := range p.Nodes {
		check(NodeKubeconfig(p, n.Name), "node "+n.Name)
	}
}
