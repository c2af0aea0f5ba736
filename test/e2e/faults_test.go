//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// faultAPIDownFor is how long the API server stays away while the kubelet restarts: longer than one sync
// period (--sync-frequency, 1 minute: every pod is synced again meanwhile) and one container collection
// (1 minute); `make soak` keeps it away for 10 minutes.
var faultAPIDownFor = envDuration("E2E_FAULT_API_DOWN", 75*time.Second)

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// runtimeView is what the node's runtime runs, read through its CRI socket: the running containers of each
// pod (by pod name) and the ready sandboxes.
type runtimeView struct {
	containers map[string][]string // pod name -> IDs of its running containers
	sandboxes  map[string][]string // pod name -> IDs of its ready sandboxes
}

func (n *node) runtimeView(t *testing.T) runtimeView {
	t.Helper()
	v, err := n.tryRuntimeView()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// tryRuntimeView is runtimeView, with an error for a runtime that does not answer (yet).
func (n *node) tryRuntimeView() (runtimeView, error) {
	rt, _, err := remote.Connect(n.criSocket(), 10*time.Second)
	if err != nil {
		return runtimeView{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := runtimeView{containers: map[string][]string{}, sandboxes: map[string][]string{}}
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return runtimeView{}, err
	}
	for _, sb := range sbs {
		v.sandboxes[sb.Metadata.Name] = append(v.sandboxes[sb.Metadata.Name], sb.Id)
	}
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return runtimeView{}, err
	}
	for _, c := range ctrs {
		name := c.Labels["io.kubernetes.pod.name"]
		v.containers[name] = append(v.containers[name], c.Id)
	}
	for _, m := range []map[string][]string{v.containers, v.sandboxes} {
		for k := range m {
			sort.Strings(m[k])
		}
	}
	return v, nil
}

// podStates reads the named pods' phase, IP and container IDs and restart counts from the API.
func (n *node) podStates(t *testing.T, names []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range names {
		p, err := n.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			out[name] = "error: " + err.Error()
			continue
		}
		s := fmt.Sprintf("%s ip=%s", p.Status.Phase, p.Status.PodIP)
		for _, cs := range p.Status.ContainerStatuses {
			s += fmt.Sprintf(" %s=%s restarts=%d ready=%v", cs.Name, cs.ContainerID, cs.RestartCount, cs.Ready)
		}
		out[name] = s
	}
	return out
}

// A kubelet restarted while its API server is down keeps every pod running, with its cgroup, network and
// IP, for as long as the API stays away; once it returns, the node converges within seconds: the pod deleted
// meanwhile is stopped, the others are adopted with the same containers and restart counts.
func TestFaultKubeletRestartWhileAPIServerDown(t *testing.T) {
	parallel(t)
	nodeKC := filepath.Join(t.TempDir(), "node.kubeconfig")
	api := startAPIServer(t, "", "--node-kubeconfig", "e2e-node="+nodeKC)
	eventually(t, 30*time.Second, "the node kubeconfig", func() error { _, err := os.Stat(nodeKC); return err })
	n := startNodeJoining(t, api, nodeKC)

	const pods = 10
	var names []string
	for i := 0; i < pods; i++ {
		p := busyboxPod(podName("steady", i), "sleep", "3600")
		p.Spec.NodeName = n.name
		n.createPod(p)
		names = append(names, p.Name)
	}
	for _, name := range names {
		n.waitPod(name, 90*time.Second, "pod ready", ready)
	}
	before := n.podStates(t, names)
	view := n.runtimeView(t)
	deleted := names[pods-1]

	// The kubelet stops; meanwhile one pod is deleted for good; then the API server goes away and the
	// kubelet starts again without it.
	n.stop()
	if err := n.client.CoreV1().Pods("default").Delete(context.Background(), deleted, metav1.DeleteOptions{GracePeriodSeconds: ptrInt64(0)}); err != nil {
		t.Fatal(err)
	}
	api.kill()
	n.launch()
	start := time.Now()
	// The restarted kubelet serves its runtime once it has re-attached the running containers (seconds; more
	// on a loaded host): what is checked is that nothing was killed, not how soon the socket answers.
	eventually(t, 60*time.Second, "the restarted kubelet's runtime answering", func() error {
		_, err := n.tryRuntimeView()
		return err
	})
	checks := 0
	for time.Since(start) < faultAPIDownFor {
		time.Sleep(5 * time.Second)
		if n.exited(0) {
			t.Fatalf("the kubelet exited while the API server was away; log:\n%s", n.logTail())
		}
		var now runtimeView
		eventually(t, 30*time.Second, "the runtime's view", func() (err error) {
			now, err = n.tryRuntimeView()
			return err
		})
		for name, ids := range view.containers {
			if strings.Join(now.containers[name], ",") != strings.Join(ids, ",") {
				t.Fatalf("after %v without the API server, pod %s runs containers %v, want %v (killed or restarted)",
					time.Since(start).Round(time.Second), name, now.containers[name], ids)
			}
		}
		for name, ids := range view.sandboxes {
			if strings.Join(now.sandboxes[name], ",") != strings.Join(ids, ",") {
				t.Fatalf("after %v without the API server, pod %s has sandboxes %v, want %v",
					time.Since(start).Round(time.Second), name, now.sandboxes[name], ids)
			}
		}
		checks++
	}
	t.Logf("census after %v without the API server (%d checks): %d pods, %d containers running, 0 killed or restarted",
		faultAPIDownFor, checks, len(view.sandboxes), len(view.containers))

	// The API server returns: the deleted pod stops within 10 s; the others keep their containers.
	api.start()
	returned := time.Now()
	eventually(t, 10*time.Second, "the pod deleted meanwhile stopped", func() error {
		if now := n.runtimeView(t); len(now.containers[deleted])+len(now.sandboxes[deleted]) > 0 {
			return fmt.Errorf("pod %s still runs %v", deleted, now.containers[deleted])
		}
		return nil
	})
	t.Logf("the deleted pod stopped %v after the API server returned", time.Since(returned).Round(100*time.Millisecond))
	now := n.runtimeView(t)
	for _, name := range names[:pods-1] {
		if strings.Join(now.containers[name], ",") != strings.Join(view.containers[name], ",") {
			t.Errorf("pod %s runs %v after the API returned, want %v", name, now.containers[name], view.containers[name])
		}
	}
	eventually(t, 10*time.Second, "the API shows every pod as before", func() error {
		after := n.podStates(t, names[:pods-1])
		for _, name := range names[:pods-1] {
			if after[name] != before[name] {
				return fmt.Errorf("pod %s: %s, was %s", name, after[name], before[name])
			}
		}
		return nil
	})
}

// A kubelet killed (SIGKILL) at each step of a pod start, then started again, runs the pod once: one
// sandbox, one running container, as many IPs and cgroups as one pod has; and once the pod is deleted,
// nothing of it is left.
func TestFaultKubeletKilledDuringPodStart(t *testing.T) {
	nodeKC := filepath.Join(t.TempDir(), "node.kubeconfig")
	api := startAPIServer(t, "", "--node-kubeconfig", "e2e-node="+nodeKC)
	eventually(t, 30*time.Second, "the node kubeconfig", func() error { _, err := os.Stat(nodeKC); return err })
	n := startNodeJoining(t, api, nodeKC)
	root := filepath.Join(n.dir, "root")
	eventually(t, 30*time.Second, "the node ready", func() error {
		node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return nodeReady(node)
	})
	before := takeCensus(t, root)
	for _, step := range []string{failpoint.AfterPodCgroup, failpoint.AfterCNIAdd, failpoint.AfterSandbox, failpoint.AfterContainerCreate} {
		t.Run(step, func(t *testing.T) {
			n.stop()
			n.launch(failpoint.EnvVar + "=" + step)
			name := "killed-" + step
			p := busyboxPod(name, "sleep", "3600")
			p.Spec.NodeName = n.name
			n.createPod(p)
			if !n.exited(60 * time.Second) {
				t.Fatalf("the kubelet did not die at %s; log:\n%s", step, n.logTail())
			}
			n.start()
			n.waitPod(name, 90*time.Second, "pod ready after the restart", ready)
			view := n.runtimeView(t)
			if len(view.sandboxes[name]) != 1 || len(view.containers[name]) != 1 {
				t.Errorf("after a kill at %s the pod runs %d sandboxes and %d containers, want 1 and 1",
					step, len(view.sandboxes[name]), len(view.containers[name]))
			}
			if err := n.client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			var left census
			eventually(t, 60*time.Second, "nothing of the pod left", func() error {
				if left = takeCensus(t, root).leftSince(before); !left.empty() {
					return fmt.Errorf("left: %v", left)
				}
				return nil
			})
			t.Logf("census after a kill at %s and the pod's deletion: %v", step, left)
		})
	}
}

// faultChurnCycles is how many cycles of 30 pods TestFaultPodChurnLeavesNothing runs (120 pods by default;
// `make soak` runs more).
var faultChurnCycles = envInt("E2E_FAULT_CHURN_CYCLES", 4)

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// Pods created and deleted in cycles of 30 leave nothing behind: no cgroup, network namespace, veth, IP
// reservation, mount, pod directory, containerd container, snapshot or task.
func TestFaultPodChurnLeavesNothing(t *testing.T) {
	n := startNode(t)
	root := filepath.Join(n.dir, "root")
	before := takeCensus(t, root)
	const perCycle = 30
	start := time.Now()
	for cycle := 0; cycle < faultChurnCycles; cycle++ {
		var names []string
		for i := 0; i < perCycle; i++ {
			name := fmt.Sprintf("churn-%d-%d", cycle, i)
			n.createPod(busyboxPod(name, "sleep", "3600"))
			names = append(names, name)
		}
		for _, name := range names {
			n.waitPod(name, 120*time.Second, "pod ready", ready)
		}
		if err := n.client.CoreV1().Pods("default").DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 120*time.Second, "the cycle's pods gone from the API", func() error {
			pods, err := n.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
			if err == nil && len(pods.Items) > 0 {
				err = fmt.Errorf("%d pods left", len(pods.Items))
			}
			return err
		})
	}
	var left census
	eventually(t, 60*time.Second, "nothing of the pods left on the host", func() error {
		if left = takeCensus(t, root).leftSince(before); !left.empty() {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
	t.Logf("census after %d pods in %d cycles of %d (%v): %v", faultChurnCycles*perCycle, faultChurnCycles, perCycle,
		time.Since(start).Round(time.Second), left)
}

// faultContainerdRounds is how many times TestFaultContainerdKilled kills containerd (`make soak` more).
var faultContainerdRounds = envInt("E2E_FAULT_CONTAINERD_ROUNDS", 3)

// containerdPID reads the PID of the node agent's containerd from the pid file hack/setup.sh writes.
func containerdPID(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/run/nodeagent/containerd/containerd.pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// restartContainerd starts containerd again as `make setup` does (its set-up is idempotent).
func restartContainerd(t *testing.T) {
	t.Helper()
	cmd := exec.Command("../../hack/setup.sh")
	cmd.Env = append(os.Environ(), "NODEAGENT_SKIP_APT=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restart containerd: %v\n%s", err, out)
	}
}

// containerd killed with SIGKILL and started again, three times, while 20 pods run and 10 more start: no
// container is lost, every pod runs again within 30 s of each restart, and no pod gets a second sandbox.
func TestFaultContainerdKilled(t *testing.T) {
	n := startNode(t)
	var names []string
	add := func(count int) []string {
		var added []string
		for i := 0; i < count; i++ {
			name := podName("ctrd", len(names))
			n.createPod(busyboxPod(name, "sleep", "3600"))
			names = append(names, name)
			added = append(added, name)
		}
		return added
	}
	for _, name := range add(20) {
		n.waitPod(name, 120*time.Second, "pod ready", ready)
	}
	running := n.runtimeView(t)
	for round := 1; round <= faultContainerdRounds; round++ {
		starting := add(10)
		time.Sleep(time.Duration(round%3*250) * time.Millisecond) // the new pods are part way through their start
		pid := containerdPID(t)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Second)
		restartContainerd(t)
		restarted := time.Now()
		for _, name := range names {
			n.waitPod(name, 30*time.Second, "pod ready after containerd's restart", ready)
		}
		took := time.Since(restarted)
		view := n.runtimeView(t)
		for name, ids := range running.containers {
			if strings.Join(view.containers[name], ",") != strings.Join(ids, ",") {
				t.Errorf("round %d: pod %s runs %v, ran %v before containerd's restart; the kubelet's lines about it:\n%s",
					round, name, view.containers[name], ids, kubeletLinesAbout(n, name, ids))
			}
		}
		// A start cut off by the kill may leave its process running after the next sync started the container
		// again: the kubelet stops the older instance once it sees both. A pod left with neither running (seen
		// once in CI, for a pod that was starting) runs again after its restart back-off, 10 s.
		eventually(t, 40*time.Second, fmt.Sprintf("round %d: one ready sandbox and one running container per pod", round), func() error {
			view = n.runtimeView(t)
			for _, name := range names {
				if len(view.sandboxes[name]) != 1 || len(view.containers[name]) != 1 {
					return fmt.Errorf("pod %s has %d ready sandboxes and %d running containers, want 1 and 1",
						name, len(view.sandboxes[name]), len(view.containers[name]))
				}
			}
			return nil
		})
		log, _ := os.ReadFile(filepath.Join(n.dir, "kubelet.log"))
		t.Logf("containerd killed, round %d: %d pods (%d were starting) all ready %v after its restart; %d containers kept; %d failed syncs so far",
			round, len(names), len(starting), took.Round(100*time.Millisecond), len(running.containers), strings.Count(string(log), "Pod sync failed"))
		running = view
	}
}

// kubeletLinesAbout is the last 20 lines of the node's kubelet log that name the pod or one of the
// containers, for a test failure to say what the kubelet saw.
func kubeletLinesAbout(n *node, pod string, ids []string) string {
	data, _ := os.ReadFile(filepath.Join(n.dir, "kubelet.log"))
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		hit := strings.Contains(l, "/"+pod+"\"") || strings.Contains(l, "/"+pod+" ")
		for _, id := range ids {
			hit = hit || (len(id) >= 12 && strings.Contains(l, id[:12]))
		}
		if hit {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
