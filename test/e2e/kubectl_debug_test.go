//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectlCmd is kubectl as the node's cluster admin, with a home of its own.
func (n *node) kubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	kc := filepath.Join(n.dir, "admin.kubeconfig")
	if n.cp != nil {
		kc = n.cp.kubeconfig
	}
	home := filepath.Join(n.dir, "kubectl-home")
	cmd := exec.CommandContext(ctx, kubectlPath, append([]string{"--kubeconfig", kc, "--cache-dir", filepath.Join(home, "cache")}, args...)...)
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	return cmd
}

// kubectlIn runs kubectl with stdin, as a user at a terminal would pipe it.
func (n *node) kubectlIn(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := n.kubectlCmd(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectlSession runs kubectl as a user at a terminal would: it types the input, waits until the output
// holds want, typing the input again every 3 s meanwhile (a line typed before the attach stream is up is
// lost, which is why kubectl says "If you don't see a command prompt, try pressing enter"), up to 30 s; then
// it types "exit" and closes its input. It returns kubectl's output.
func (n *node) kubectlSession(input, want string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := n.kubectlCmd(ctx, args...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	_, _ = io.WriteString(stdin, input)
	typed := time.Now()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), want) && time.Now().Before(deadline); {
		if time.Since(typed) > 3*time.Second {
			_, _ = io.WriteString(stdin, input)
			typed = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = io.WriteString(stdin, "exit\n")
	_ = stdin.Close()
	err = cmd.Wait()
	return out.String(), err
}

// TestKubectlDebug drives the real kubectl debug: an ephemeral container with --target sees the target
// container's processes and is reported in ephemeralContainerStatuses, without disturbing the pod; a node
// debug pod sees the host's root at /host and the host's processes.
func TestKubectlDebug(t *testing.T) {
	parallel(t)
	forEachRuntime(t, testKubectlDebug)
}

func testKubectlDebug(t *testing.T, n *node) {
	n.createPod(busyboxPod("app", "sleep", "31536"))
	n.waitPod("app", 60*time.Second, "pod Ready", ready)

	out, err := n.kubectlSession("ps\n", "sleep 31536", "debug", "app", "-i", "--image="+busyboxImage, "--target=main", "-c", "dbg",
		"--profile=general", "--", "sh")
	if err != nil {
		t.Fatalf("kubectl debug --target: %v\n%s", err, out)
	}
	if !strings.Contains(out, "sleep 31536") {
		t.Errorf("the debug container does not see the target's processes:\n%s", out)
	}
	pod := n.waitPod("app", 30*time.Second, "the ephemeral container reported finished", func(p *v1.Pod) error {
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name == "dbg" && s.State.Terminated != nil {
				if s.State.Terminated.ExitCode != 0 {
					return fmt.Errorf("dbg exited %d", s.State.Terminated.ExitCode)
				}
				return nil
			}
		}
		return fmt.Errorf("ephemeral container statuses %+v", p.Status.EphemeralContainerStatuses)
	})
	if err := ready(pod); err != nil || pod.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("debugging disturbed the pod: %v, restarts %d", err, pod.Status.ContainerStatuses[0].RestartCount)
	}
	if logs, err := n.kubectlIn("", "logs", "app", "-c", "dbg"); err != nil || !strings.Contains(logs, "sleep 31536") {
		t.Errorf("kubectl logs of the ephemeral container: %v\n%s", err, logs)
	}
	// It never restarts, and an invalid one is refused by the API with its reason.
	time.Sleep(2 * time.Second)
	if p, err := n.client.CoreV1().Pods("default").Get(context.Background(), "app", metav1.GetOptions{}); err != nil ||
		len(p.Status.EphemeralContainerStatuses) != 1 || p.Status.EphemeralContainerStatuses[0].RestartCount != 0 {
		t.Errorf("after it exited: %v %+v", err, p.Status.EphemeralContainerStatuses)
	}
	if out, err := n.kubectlIn("", "debug", "app", "--image="+busyboxImage, "--target=nope", "-c", "dbg2", "--profile=general",
		"--", "true"); err == nil || !strings.Contains(out, "targetContainerName: Not found") {
		t.Errorf("a debug container targeting a missing container: %v\n%s", err, out)
	}

	// The node: the host's root at /host, the host's processes.
	marker := filepath.Join(t.TempDir(), "marker")
	want := fmt.Sprintf("host-%d", time.Now().UnixNano())
	if err := os.WriteFile(marker, []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("cat /host%s\ncat /proc/%d/comm\n", marker, n.cmd.Process.Pid)
	out, err = n.kubectlSession(script, "kubelet", "debug", "node/"+n.name, "-i", "--image="+busyboxImage, "--profile=general", "--", "sh")
	if err != nil {
		t.Fatalf("kubectl debug node/: %v\n%s", err, out)
	}
	if !strings.Contains(out, want) {
		t.Errorf("the node debug pod does not see the host's root at /host:\n%s", out)
	}
	if !hasLine(out, "kubelet") {
		t.Errorf("the node debug pod does not see the host's processes (the kubelet, pid %s):\n%s", strconv.Itoa(n.cmd.Process.Pid), out)
	}
	pods, err := n.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kubectl-debug"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("node debug pods: %v %d", err, len(pods.Items))
	}
	if p := pods.Items[0]; !p.Spec.HostPID || p.Spec.NodeName != n.name {
		t.Errorf("node debug pod %s: hostPID %v node %q", p.Name, p.Spec.HostPID, p.Spec.NodeName)
	}
	n.waitPod(pods.Items[0].Name, 30*time.Second, "the node debug pod Succeeded", func(p *v1.Pod) error {
		if p.Status.Phase != v1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
}

func hasLine(out, line string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
