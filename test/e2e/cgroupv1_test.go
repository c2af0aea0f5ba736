//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// On this cgroup v1 host the node runs, as upstream 1.35 runs with failCgroupV1: false: it records upstream's
// CgroupV1 warning on its Node and reports kubelet_cgroup_version 1. With failCgroupV1: true in its
// configuration file it refuses to start with upstream's error, creating no cgroup.
func TestKubeletCgroupV1(t *testing.T) {
	parallel(t)
	n := startNode(t)
	eventually(t, 30*time.Second, "the CgroupV1 warning on the Node", func() error {
		evs, err := n.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + n.name + ",reason=CgroupV1"})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 || evs.Items[0].Type != "Warning" ||
			!strings.HasPrefix(evs.Items[0].Message, "cgroup v1 detected. cgroup v1 support is deprecated") {
			return fmt.Errorf("events %+v", evs.Items)
		}
		return nil
	})
	// The warning is recorded at start, before the Node is registered; /metrics is read through the Node's
	// proxy once it is.
	var metrics []byte
	eventually(t, 30*time.Second, "/metrics through the Node's proxy", func() (err error) {
		metrics, err = n.proxyGet("metrics")
		return err
	})
	if !strings.Contains(string(metrics), "\nkubelet_cgroup_version 1\n") {
		t.Errorf("/metrics lacks kubelet_cgroup_version 1")
	}

	dir := t.TempDir()
	cfg := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := "/e2e-pfailcgroupv1" // a slot's prefix: what a failure leaves goes with the slots
	out, err := exec.CommandContext(ctx, kubeletBinary(t), "--config", cfg, "--hostname-override", "e2e-node",
		"--root-dir", filepath.Join(dir, "root"), "--apiserver-data-dir", filepath.Join(dir, "apiserver"), "--apiserver-port", "0",
		"--admin-kubeconfig", filepath.Join(dir, "admin.kubeconfig"), "--cri-socket", filepath.Join(dir, "cri.sock"),
		"--port", fmt.Sprint(freePort(t)), "--healthz-port", fmt.Sprint(freePort(t)), "--containerd-namespace", "e2e-pfailcgroupv1", "--cgroup-root", root).CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the kubelet with failCgroupV1 did not refuse to start (%v):\n%s", err, lastBytes(out, 2000))
	}
	if !strings.Contains(string(out), "kubelet is configured to not run on a host using cgroup v1") {
		t.Errorf("the refusal lacks upstream's error:\n%s", lastBytes(out, 2000))
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*" + root); len(left) > 0 {
		t.Errorf("a refused start left cgroups: %v", left)
	}
}

// lastBytes is the end of a command's output.
func lastBytes(out []byte, n int) string {
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}
