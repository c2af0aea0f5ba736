//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/kubelet/pkg/cluster"
)

// e2eCluster is a cluster started with cmd/nodecluster, as a user starts one.
type e2eCluster struct {
	t     *testing.T
	bin   string
	args  []string
	plan  *cluster.Plan
	admin kubernetes.Interface
}

func newE2ECluster(t *testing.T, name, subnet, controlPlane string) *e2eCluster {
	bin := filepath.Join(filepath.Dir(kubeletBinary(t)), "nodecluster")
	plan, err := cluster.NewPlan(name, 3, subnet, cluster.DefaultClusterCIDR)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.UseControlPlane(controlPlane); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(controlPlaneScript)
	if err != nil {
		t.Fatal(err)
	}
	return &e2eCluster{t: t, bin: bin, plan: plan, args: []string{"--name", name, "--subnet", subnet,
		"--control-plane", controlPlane, "--control-plane-script", script}}
}

// run runs nodecluster with args and returns its output and error.
func (c *e2eCluster) run(args ...string) (string, error) {
	cmd := exec.Command(c.bin, append(append([]string(nil), c.args...), args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *e2eCluster) must(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("nodecluster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *e2eCluster) nodeClient(node string) kubernetes.Interface {
	c.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.NodeKubeconfig(c.plan, node))
	if err != nil {
		c.t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// waitNode waits until node's Ready condition is want; Unknown must come with the unreachable taints, True
// without them. It returns how long that took.
func (c *e2eCluster) waitNode(node string, want v1.ConditionStatus, timeout time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	eventually(c.t, timeout, fmt.Sprintf("node %s Ready=%s", node, want), func() error {
		s, taints := nodeReadyAndTaints(c.admin, node)
		unreachable := slices.ContainsFunc(taints, func(t v1.Taint) bool {
			return t.Key == v1.TaintNodeUnreachable && t.Effect == v1.TaintEffectNoExecute
		}) && slices.ContainsFunc(taints, func(t v1.Taint) bool {
			return t.Key == v1.TaintNodeUnreachable && t.Effect == v1.TaintEffectNoSchedule
		})
		if s != want || unreachable != (want == v1.ConditionUnknown) {
			return fmt.Errorf("Ready %q, taints %v", s, taints)
		}
		return nil
	})
	return time.Since(start)
}

// exec runs a command in a pod through the API server (and the pod's kubelet) and returns its output.
func (c *e2eCluster) exec(pod string, cmd ...string) (string, error) {
	kubectl := exec.Command(kubectlPath, append([]string{"--kubeconfig", cluster.AdminKubeconfig(c.plan), "exec", pod, "--"}, cmd...)...)
	var out bytes.Buffer
	kubectl.Stdout, kubectl.Stderr = &out, &out
	err := kubectl.Run()
	return out.String(), err
}

func (c *e2eCluster) pod(name, node string, cmd ...string) *v1.Pod {
	p := busyboxPod(name, cmd...)
	p.Spec.NodeName = node
	p.Spec.TerminationGracePeriodSeconds = ptrInt64(1)
	return p
}

// A three-node cluster of our nodes in containers on this host, with the lightweight API server on the
// first node: the checks of checkCluster, and up stops at once when a node's daemon fails. It runs beside
// TestClusterKubeAPIServer (two clusters at once, as a user may run them), after the other tests.
func TestCluster(t *testing.T) {
	parallel(t)
	c := newE2ECluster(t, "e2e", "172.30.9.0/24", cluster.ControlPlaneLightweight)
	c.checkCluster()

	// A node whose daemon fails (here the API server, refusing a cluster CIDR smaller than a node's /24)
	// stops, and up says which node and where its log is, without waiting out its timeout.
	start := time.Now()
	out, err := c.run("--cluster-cidr", "10.244.0.0/28", "up", "3")
	if err == nil || !strings.Contains(out, "stopped before it was Ready") || !strings.Contains(out, c.plan.Nodes[0].Name+".log") {
		t.Errorf("up with a control plane that cannot start: %v\n%s", err, out)
	}
	if time.Since(start) > time.Minute {
		t.Errorf("up took %v to report a stopped node", time.Since(start))
	}
	c.must("down")
	c.assertNothingLeft()
}

// The same three nodes with upstream's control plane on the host (etcd, kube-apiserver with the Node
// authorizer, kube-controller-manager's node lifecycle and node IPAM, kube-scheduler's placement): the same
// checks.
func TestClusterKubeAPIServer(t *testing.T) {
	parallel(t)
	c := newE2ECluster(t, "e2ek", "172.30.10.0/24", cluster.ControlPlaneKubeAPIServer)
	c.checkCluster()
}

// checkCluster brings the cluster up and checks it: pods spread over all nodes, a pod reaches a pod on
// another node over TCP, each node reads only its own pods' secrets, a frozen node and a cut-off node turn
// Unknown and unreachable-tainted within the Lease period and come back Ready with their pods unrestarted,
// and down leaves nothing; up twice, down twice and down after a failed up are safe.
func (c *e2eCluster) checkCluster() {
	t := c.t
	c.run("down") // a cluster a killed earlier run left
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.plan.Nodes {
				t.Logf("%s log tail:\n%s", n.Name, tail(filepath.Join(c.plan.StateDir, n.Name+".log"), 3000))
			}
		}
		if out, err := c.run("down"); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
	})
	start := time.Now()
	t.Log(strings.TrimSpace(c.must("up", "3")))
	t.Logf("up 3: %v", time.Since(start).Round(100*time.Millisecond))
	if out := c.must("up", "3"); !strings.Contains(out, "already up") {
		t.Fatalf("up twice: %s", out)
	}
	var err error
	if c.admin, err = cluster.AdminClient(c.plan); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods := c.admin.CoreV1().Pods("default")

	// Placement spreads six unbound pods over the three nodes.
	for i := 0; i < 6; i++ {
		p := busyboxPod(fmt.Sprintf("spread-%d", i), "sleep", "3600")
		p.Spec.TerminationGracePeriodSeconds = ptrInt64(1)
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 90*time.Second, "six pods running on three nodes", func() error {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		perNode := map[string]int{}
		for _, p := range list.Items {
			if strings.HasPrefix(p.Name, "spread-") && ready(&p) == nil {
				perNode[p.Spec.NodeName]++
			}
		}
		if len(perNode) != 3 || perNode[c.plan.Nodes[0].Name]+perNode[c.plan.Nodes[1].Name]+perNode[c.plan.Nodes[2].Name] != 6 {
			return fmt.Errorf("running per node: %v", perNode)
		}
		return nil
	})

	// Pod to pod across nodes, each node's secrets its own.
	n1, n2, n3 := c.plan.Nodes[0].Name, c.plan.Nodes[1].Name, c.plan.Nodes[2].Name
	for _, n := range []string{n1, n3} {
		if _, err := c.admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "secret-" + n},
			StringData: map[string]string{"k": n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	server := c.pod("server", n3, "sh", "-c", "while true; do echo hello-from-"+n3+" | nc -l -p 8080; done")
	server.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "secret-" + n3}}}}
	server.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "s", MountPath: "/s"}}
	client := c.pod("client", n1, "sleep", "3600")
	client.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "secret-" + n1}}}}
	client.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "s", MountPath: "/s"}}
	frozenPod := c.pod("on-node2", n2, "sleep", "3600")
	for _, p := range []*v1.Pod{server, client, frozenPod} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var serverIP string
	eventually(t, 90*time.Second, "server, client and on-node2 running", func() error {
		for _, name := range []string{"server", "client", "on-node2"} {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := ready(p); err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
			if name == "server" {
				serverIP = p.Status.PodIP
			}
		}
		return nil
	})
	reach := func(what string) {
		t.Helper()
		eventually(t, 30*time.Second, what, func() error {
			out, err := c.exec("client", "sh", "-c", "nc -w 3 "+serverIP+" 8080 </dev/null")
			if err != nil || !strings.Contains(out, "hello-from-"+n3) {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
	reach("a pod on " + n1 + " reaches a pod on " + n3 + " over TCP")
	node1 := c.nodeClient(n1)
	if _, err := node1.CoreV1().Secrets("default").Get(ctx, "secret-"+n1, metav1.GetOptions{}); err != nil {
		t.Errorf("%s reading the secret of its own pod: %v", n1, err)
	}
	if _, err := node1.CoreV1().Secrets("default").Get(ctx, "secret-"+n3, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s reading the secret of a pod on %s: %v, want Forbidden", n1, n3, err)
	}
	if _, err := c.nodeClient(n3).CoreV1().Secrets("default").Get(ctx, "secret-"+n3, metav1.GetOptions{}); err != nil {
		t.Errorf("%s reading the secret of its own pod: %v", n3, err)
	}
	before := map[string]string{}
	for _, name := range []string{"on-node2", "server"} {
		p, _ := pods.Get(ctx, name, metav1.GetOptions{})
		before[name] = containerState(p)
	}

	// A frozen node (every process stopped, as a hung machine) turns Unknown within the Lease period and
	// comes back Ready when thawed, its pod running on without a restart.
	c.must("freeze", n2)
	t.Logf("%s Unknown %v after it froze", n2, c.waitNode(n2, v1.ConditionUnknown, 60*time.Second).Round(time.Second))
	c.must("thaw", n2)
	t.Logf("%s Ready %v after it thawed", n2, c.waitNode(n2, v1.ConditionTrue, 60*time.Second).Round(time.Second))

	// A node cut off the network (its link down in its namespace) is seen the same way, and heals.
	c.must("partition", n3)
	t.Logf("%s Unknown %v after its link went down", n3, c.waitNode(n3, v1.ConditionUnknown, 60*time.Second).Round(time.Second))
	c.must("heal", n3)
	t.Logf("%s Ready %v after its link came back", n3, c.waitNode(n3, v1.ConditionTrue, 60*time.Second).Round(time.Second))
	reach("the pod on " + n3 + " reachable again after the heal")
	// The pods the controller marked not Ready are Ready again (their kubelets repost them), with the
	// same containers and no restarts.
	for _, name := range []string{"on-node2", "server"} {
		eventually(t, 30*time.Second, "pod "+name+" Ready again, unrestarted", func() error {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := containerState(p); got != before[name] {
				t.Fatalf("pod %s before: %s, after: %s", name, before[name], got)
			}
			return ready(p)
		})
	}

	// down leaves nothing; down twice is fine; so is down after a failed up.
	c.must("down")
	c.assertNothingLeft()
	c.must("down")
	if out, err := c.run("--bin-dir", "/nonexistent", "up", "3"); err == nil || !strings.Contains(out, "/nonexistent") {
		t.Errorf("up without the binaries: %v\n%s, want an error naming the missing file", err, out)
	}
	c.must("down")
	c.assertNothingLeft()
}

// containerState is a pod's container IDs and restart counts.
func containerState(p *v1.Pod) string {
	var s []string
	for _, cs := range p.Status.ContainerStatuses {
		s = append(s, fmt.Sprintf("%s=%s restarts=%d", cs.Name, cs.ContainerID, cs.RestartCount))
	}
	return strings.Join(s, " ")
}

// assertNothingLeft checks the host for anything of the cluster: containers, processes, network
// namespaces, links, cgroups, mounts, state.
func (c *e2eCluster) assertNothingLeft() {
	t := c.t
	t.Helper()
	client, err := containerd.New(containerdSock)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cs, err := client.Containers(namespaces.WithNamespace(context.Background(), cluster.Namespace),
		fmt.Sprintf("labels.%q==%s", cluster.LabelCluster, c.plan.Name))
	if err != nil || len(cs) > 0 {
		t.Errorf("node containers left: %d (%v)", len(cs), err)
	}
	if _, err := net.InterfaceByName(c.plan.Bridge); err == nil {
		t.Errorf("bridge %s left", c.plan.Bridge)
	}
	for _, n := range c.plan.Nodes {
		if _, err := os.Stat(filepath.Join("/run/netns", n.Netns)); err == nil {
			t.Errorf("network namespace %s left", n.Netns)
		}
		if _, err := net.InterfaceByName(n.HostVeth); err == nil {
			t.Errorf("veth %s left", n.HostVeth)
		}
		if dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cluster.Namespace + "/" + filepath.Base(n.CgroupsPath)); len(dirs) > 0 {
			t.Errorf("cgroups left: %v", dirs)
		}
	}
	if _, err := os.Stat(c.plan.StateDir); err == nil {
		t.Errorf("state directory %s left", c.plan.StateDir)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(mi), "\n") {
			if strings.Contains(l, c.plan.StateDir) || strings.Contains(l, "nodeagent-"+c.plan.Name+"-node") {
				t.Errorf("mount left: %s", l)
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(cluster.Namespace+"/"+c.plan.Name+"-node")) {
			t.Errorf("process left in the cluster's cgroups: %s: %s", filepath.Dir(p), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
		// A host control plane's processes name its directory.
		if bytes.Contains(cmdline, []byte(c.plan.StateDir+"/")) && !bytes.Contains(cmdline, []byte("nodecluster")) {
			t.Errorf("process of the cluster's control plane left: %s: %s", filepath.Dir(p), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
}
