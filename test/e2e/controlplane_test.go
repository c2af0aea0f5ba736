//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// controlPlaneScript starts etcd and kube-apiserver (idempotent), relative to this package's directory.
const controlPlaneScript = "../../hack/control-plane.sh"

// controlPlane is the real control plane of hack/control-plane.sh: kube-apiserver with Node,RBAC
// authorization and the NodeRestriction admission plugin, no scheduler and no controller manager.
type controlPlane struct {
	kubeconfig     string // admin (system:masters)
	nodeKubeconfig string // system:node:<node>, group system:nodes
	node           string
	ca             string
	auditLog       string // one JSON line per request a node made
	client         kubernetes.Interface
	scheduler      bool     // kube-scheduler places pods (privateControlPlane)
	settings       []string // hack/control-plane.sh's environment (privateControlPlane)
}

var (
	cpOnce sync.Once
	cpReal *controlPlane
	cpErr  error
)

// onRealControlPlane says whether t runs against the real control plane: every test under TestControlPlane,
// and every test when E2E_CONTROL_PLANE=real.
func onRealControlPlane(t *testing.T) bool {
	return os.Getenv("E2E_CONTROL_PLANE") == "real" || strings.HasPrefix(t.Name(), "TestControlPlane/")
}

// realControlPlane starts the control plane once per run (a no-op when `make test-e2e` started it already)
// and leaves it running; `hack/control-plane.sh stop` stops it.
func realControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	cpOnce.Do(func() { cpReal, cpErr = startControlPlane() })
	if cpErr != nil {
		t.Fatal(cpErr)
	}
	return cpReal
}

// privateControlPlane starts a control plane of hack/control-plane.sh of the test's own, in a directory of
// its own with ports of its own, for a node named node, with kube-controller-manager and kube-scheduler (as
// a kind control plane runs them): for tests of what those controllers do with the node's objects. It is
// stopped when the test ends.
func privateControlPlane(t *testing.T, node string) *controlPlane {
	t.Helper()
	env := []string{"CONTROL_PLANE_DIR=" + t.TempDir(), "CONTROL_PLANE_CONTROLLERS=1", "CONTROL_PLANE_NODE=" + node}
	t.Cleanup(func() {
		cmd := exec.Command(controlPlaneScript, "stop")
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s stop: %v\n%s", controlPlaneScript, err, out)
		}
	})
	cp, err := startControlPlane(env...)
	if err != nil {
		t.Fatal(err)
	}
	cp.scheduler, cp.settings = true, env
	// Pods are admitted once the controller manager has made the namespace's service account.
	eventually(t, 60*time.Second, "the default service account", func() error {
		_, err := cp.client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
	return cp
}

// stop stops a private control plane's processes (its data and ports are kept for start).
func (cp *controlPlane) stop(t *testing.T) {
	t.Helper()
	cmd := exec.Command(controlPlaneScript, "stop")
	cmd.Env = append(os.Environ(), cp.settings...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s stop: %v\n%s", controlPlaneScript, err, out)
	}
}

// start starts a private control plane stopped by stop again, on the same data and ports.
func (cp *controlPlane) start(t *testing.T) {
	t.Helper()
	if _, err := startControlPlane(cp.settings...); err != nil {
		t.Fatal(err)
	}
}

// startControlPlane runs hack/control-plane.sh start with env added to its environment.
func startControlPlane(settings ...string) (*controlPlane, error) {
	var stderr strings.Builder
	cmd := exec.Command(controlPlaneScript, "start")
	cmd.Env = append(os.Environ(), settings...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s start: %v\n%s", controlPlaneScript, err, stderr.String())
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			env[k] = v
		}
	}
	cp := &controlPlane{
		kubeconfig: env["CONTROL_PLANE_KUBECONFIG"], nodeKubeconfig: env["CONTROL_PLANE_NODE_KUBECONFIG"],
		node: env["CONTROL_PLANE_NODE"], ca: env["CONTROL_PLANE_CA"], auditLog: env["CONTROL_PLANE_AUDIT_LOG"],
	}
	if cp.kubeconfig == "" || cp.nodeKubeconfig == "" || cp.ca == "" || cp.node == "" {
		return nil, fmt.Errorf("%s start printed no environment:\n%s", controlPlaneScript, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	if cp.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return cp, nil
}

// joinRealControlPlane makes n a kubelet of the real control plane: the node identity's kubeconfig, the
// cluster CA for callers of its endpoint, free ports, and the node name resolving to 127.0.0.1 for the API
// server's proxy to the kubelet. The Node and Lease of an earlier test are removed first.
func (n *node) joinRealControlPlane(extraArgs []string) {
	n.t.Helper()
	n.joinControlPlane(realControlPlane(n.t), extraArgs)
}

// joinControlPlane makes n a kubelet of the control plane cp (see joinRealControlPlane).
func (n *node) joinControlPlane(cp *controlPlane, extraArgs []string) {
	t := n.t
	t.Helper()
	n.cp = cp
	n.name = n.cp.node
	n.client = n.cp.client
	n.args = append([]string{
		"--hostname-override", n.name,
		"--kubeconfig", n.cp.nodeKubeconfig,
		"--client-ca-file", n.cp.ca,
		"--root-dir", filepath.Join(n.dir, "root"),
		"--cri-socket", filepath.Join(n.dir, "cri.sock"),
		"--pod-manifest-path", filepath.Join(n.dir, "manifests"),
		"--port", strconv.Itoa(freePort(t)),
		"--healthz-port", strconv.Itoa(freePort(t)),
		"-v", "2",
	}, append(n.isolateRuntime(t), extraArgs...)...)
	if err := os.MkdirAll(filepath.Join(n.dir, "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	n.forgetNode()
	removeHostsLine := addHostsLine(t, n.name)
	auditStart := fileSize(n.cp.auditLog)
	t.Cleanup(func() {
		n.forgetNode()
		removeHostsLine()
		n.checkAudit(auditStart)
	})
}

// waitRegistered waits until the kubelet has registered its Node (or found it registered).
func (n *node) waitRegistered() {
	n.t.Helper()
	eventually(n.t, 60*time.Second, "kubelet registers its Node", func() error {
		select {
		case err := <-n.done:
			n.done <- err
			return fmt.Errorf("kubelet exited: %v; log:\n%s", err, n.logTail())
		default:
		}
		_, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		return err
	})
}

// podsListOptions selects the pods of this node: a real control plane may hold other nodes' pods.
func (n *node) podsListOptions() metav1.ListOptions {
	if n.cp == nil {
		return metav1.ListOptions{}
	}
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String()}
}

// forgetNode deletes the node's Node and Lease, as removing a node from a cluster does.
func (n *node) forgetNode() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := n.client.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		n.t.Errorf("delete node %s: %v", n.name, err)
	}
	err = n.client.CoordinationV1().Leases("kube-node-lease").Delete(ctx, n.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		n.t.Errorf("delete lease %s: %v", n.name, err)
	}
	// Pods still bound to the node name (left by an interrupted run on the shared control plane) would
	// be the next kubelet's of that name: gone at once, as for a node that was never there.
	pods, err := n.client.CoreV1().Pods("").List(ctx, n.podsListOptions())
	if err != nil {
		n.t.Errorf("list pods of node %s: %v", n.name, err)
		return
	}
	for _, p := range pods.Items {
		n.t.Logf("deleting pod %s/%s left on node %s", p.Namespace, p.Name, n.name)
		err := n.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if err != nil && !apierrors.IsNotFound(err) {
			n.t.Errorf("delete pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event the checks read.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ResponseStatus struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
}

// checkAudit fails the test for every write of this node, since offset start of the audit log, that the
// API server refused as forbidden or invalid: a pod status patch, an event, a Node or Lease write that a
// real control plane does not accept. Not found and conflicts are part of the protocol (a first Lease get,
// a status patch racing a deletion); refused reads are logged.
func (n *node) checkAudit(start int64) {
	f, err := os.Open(n.cp.auditLog)
	if err != nil {
		n.t.Errorf("audit log: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return // rotated: nothing to check
	}
	user := "system:node:" + n.name
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// A token request for a pod the node has just been given can reach the Node authorizer before its graph
	// has the pod ("no relationship found"), or NodeRestriction before its cache has the pod's binding ("a pod
	// scheduled on a different node"), as with upstream's kubelet; it is refused only if no retry of the same
	// request succeeded.
	raced := map[string]auditEvent{}
	defer func() {
		for _, ev := range raced {
			n.t.Errorf("the API server refused the node's %s %s and never granted it: %d %s", ev.Verb, ev.RequestURI,
				ev.ResponseStatus.Code, ev.ResponseStatus.Message)
		}
	}()
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.User.Username != user {
			continue
		}
		code := ev.ResponseStatus.Code
		isToken := ev.Verb == "create" && strings.HasSuffix(ev.RequestURI, "/token")
		switch {
		case isToken && code < 400:
			delete(raced, ev.RequestURI)
		case isToken && code == 403 && (strings.Contains(ev.ResponseStatus.Message, "no relationship found") ||
			strings.Contains(ev.ResponseStatus.Message, "scheduled on a different node")):
			raced[ev.RequestURI] = ev
		case code < 400 || code == 404 || code == 409 || code == 410:
		case code >= 500:
			// The API server's own failure (etcd timing out under load), not a refusal of the node: the node
			// retries, and the test's own checks say whether that worked.
			n.t.Logf("the API server failed the node's %s %s: %d %s", ev.Verb, ev.RequestURI, code, ev.ResponseStatus.Message)
		case code == 403 && (ev.Verb == "get" || ev.Verb == "list" || ev.Verb == "watch"):
			// A node may not read a pod that is not bound to it, nor one that does not exist yet.
			n.t.Logf("the API server refused a read of the node: %s %s: %s", ev.Verb, ev.RequestURI,
				ev.ResponseStatus.Message)
		default:
			n.t.Errorf("the API server refused the node's %s %s: %d %s", ev.Verb, ev.RequestURI, code,
				ev.ResponseStatus.Message)
		}
	}
}

// addHostsLine maps name to 127.0.0.1 in /etc/hosts (edited in place) unless it is mapped already, and
// returns the function that removes the line again.
func addHostsLine(t *testing.T, name string) func() {
	t.Helper()
	const hosts = "/etc/hosts"
	unlock := lockHosts(t)
	defer unlock()
	b, err := os.ReadFile(hosts)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "127.0.0.1" && !strings.HasPrefix(f[0], "#") {
			for _, h := range f[1:] {
				if h == name {
					return func() {}
				}
			}
		}
	}
	line := "127.0.0.1 " + name + " # nodeagent e2e\n"
	if len(b) > 0 && b[len(b)-1] != '\n' {
		line = "\n" + line
	}
	if err := os.WriteFile(hosts, append(b, line...), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		unlock := lockHosts(t)
		defer unlock()
		cur, err := os.ReadFile(hosts)
		if err != nil {
			return
		}
		if out := strings.Replace(string(cur), line, "", 1); out != string(cur) {
			_ = os.WriteFile(hosts, []byte(out), 0o644)
		}
	}
}

// lockHosts takes the lock hack/control-plane.sh takes to change /etc/hosts (hosts_locked).
func lockHosts(t *testing.T) func() {
	const lock = "/run/lock/nodeagent-hosts.lock"
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// TestControlPlane runs the kubelet against a real kube-apiserver with etcd: registration, Node status and
// Lease, pods and their status patches, events, logs through the API server's proxy, deletion, a kubelet
// restart and mirror pods, each request checked against the audit log for refusals.
func TestControlPlane(t *testing.T) {
	parallel(t)
	t.Run("NodeReadyAndLeaseRenewed", testNodeReadyAndLease)
	t.Run("PodEventsAndKubectlLogs", testPodEventsAndKubectlLogs)
	t.Run("PodRunsAndBecomesReady", TestKubeletPodRunsAndBecomesReady)
	t.Run("MissingImage", TestKubeletMissingImage)
	t.Run("InitContainerFailureBlocksApp", TestKubeletInitContainerFailureBlocksApp)
	t.Run("DeletedPodLeavesNothing", TestKubeletDeletedPodLeavesNothing)
	t.Run("RestartRestartsNoContainer", TestKubeletRestartRestartsNoContainer)
	t.Run("StaticPod", TestKubeletStaticPod)
	t.Run("EndpointAuthorization", TestKubeletEndpointAuthorization)
	t.Run("AdmitsByItsNode", TestKubeletAdmitsByItsNode)
	t.Run("ServiceEnv", TestKubeletServiceEnv)
	t.Run("ServiceAccountToken", TestKubeletServiceAccountToken)
	t.Run("PersistentVolumeClaim", TestKubeletPersistentVolumeClaim)
	t.Run("InPlaceResize", TestKubeletInPlaceResize)
	t.Run("KubectlDebug", func(t *testing.T) { testKubectlDebug(t, startNode(t)) })
}

func nodeReady(n *v1.Node) error {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			if c.Status == v1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("Ready %s: %s %s", c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Errorf("no Ready condition")
}

// The node registers with its labels, addresses and endpoint, becomes Ready, and renews its Lease.
func testNodeReadyAndLease(t *testing.T) {
	kubeletBinary(t) // built before the clock starts
	start := time.Now()
	n := startNode(t)
	ctx := context.Background()
	var node *v1.Node
	eventually(t, 30*time.Second, "node Ready", func() error {
		var err error
		if node, err = n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err != nil {
			return err
		}
		return nodeReady(node)
	})
	t.Logf("node Ready %v after the kubelet started", time.Since(start).Round(time.Millisecond))
	if node.Labels[v1.LabelHostname] != n.name || node.Labels[v1.LabelOSStable] != "linux" {
		t.Errorf("labels %v", node.Labels)
	}
	hasHostname := false
	for _, a := range node.Status.Addresses {
		hasHostname = hasHostname || (a.Type == v1.NodeHostName && a.Address == n.name)
	}
	if !hasHostname {
		t.Errorf("addresses %v lack Hostname %s", node.Status.Addresses, n.name)
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if want := n.args[indexOf(n.args, "--port")+1]; strconv.Itoa(int(port)) != want {
		t.Errorf("daemonEndpoints port %d, want %s", port, want)
	}
	if node.Status.NodeInfo.KubeletVersion == "" || node.Status.Capacity.Pods().Value() == 0 {
		t.Errorf("nodeInfo %+v capacity %v", node.Status.NodeInfo, node.Status.Capacity)
	}

	leases := n.client.CoordinationV1().Leases("kube-node-lease")
	lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != n.name ||
		lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease spec %+v", lease.Spec)
	}
	first := lease.Spec.RenewTime.Time
	eventually(t, 25*time.Second, "lease renewed and owned by the Node", func() error {
		l, err := leases.Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !l.Spec.RenewTime.After(first) {
			return fmt.Errorf("renewTime still %v", l.Spec.RenewTime)
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != node.UID {
			return fmt.Errorf("lease owners %+v, want the Node %s", l.OwnerReferences, node.UID)
		}
		return nil
	})
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -len(args) - 2 // makes args[i+1] panic loudly in a test that expected the flag
}

// A running pod's events are recorded, and kubectl reads its logs through the API server's proxy to the
// kubelet's endpoint.
func testPodEventsAndKubectlLogs(t *testing.T) {
	n := startNode(t)
	pod := n.createPod(busyboxPod("talker", "sh", "-c", "echo first; echo second; exec sleep 3600"))
	n.waitPod("talker", 60*time.Second, "pod Ready", ready)

	want := map[string]bool{"Pulled": false, "Created": false, "Started": false}
	eventually(t, 20*time.Second, "pod events recorded", func() error {
		evs, err := n.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)).String()})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if _, ok := want[ev.Reason]; ok {
				want[ev.Reason] = true
				if ev.Source.Component != "kubelet" || ev.Source.Host != n.name {
					return fmt.Errorf("event %s from %+v", ev.Reason, ev.Source)
				}
			}
		}
		for reason, seen := range want {
			if !seen {
				return fmt.Errorf("no %s event yet (%d events)", reason, len(evs.Items))
			}
		}
		return nil
	})

	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl = kubectlPath
	}
	home := t.TempDir()
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", n.cp.kubeconfig,
			"--cache-dir", filepath.Join(home, "cache")}, args...)...)
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	eventually(t, 20*time.Second, "kubectl logs", func() error {
		if out := run("logs", "talker"); out != "first\nsecond\n" {
			return fmt.Errorf("kubectl logs: %q", out)
		}
		return nil
	})
	if out := run("logs", "talker", "-c", "main", "--tail=1"); out != "second\n" {
		t.Errorf("kubectl logs --tail=1: %q", out)
	}
	if out := run("get", "node", n.name, "--no-headers"); !strings.Contains(out, " Ready ") {
		t.Errorf("kubectl get node: %q", out)
	}
}
