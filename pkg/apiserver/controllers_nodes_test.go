package apiserver

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// A node whose kubelet goes silent is marked Unknown after the grace period and tainted unreachable, its
// pods marked not Ready and evicted after their toleration; when it comes back, it is Ready and untainted.
func TestNodeLifecycle(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	ts := startServer(t, "", func(c *Config) { c.Clock = clk })
	ctx := ctxT(t)
	nodes := ts.client.CoreV1().Nodes()
	leases := ts.client.CoordinationV1().Leases(NodeLeaseNS)
	// n1 goes silent; n2 keeps renewing its Lease until the end (a cluster with no Ready node evicts
	// nothing: see the end).
	for _, name := range []string{"n1", "n2"} {
		if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: clk.Now()}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	heartbeatOf := func(name string) {
		t.Helper()
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.NewTime(clk.Now())}}
		if _, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	heartbeat := func() { heartbeatOf("n1") }
	heartbeatOf("n1")
	heartbeatOf("n2")
	n2Alive := true
	renewN2 := func() {
		t.Helper()
		l, err := leases.Get(ctx, "n2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: clk.Now()}
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := ts.client.CoreV1().Pods("default")
	bound := func(name string, tol ...corev1.Toleration) {
		t.Helper()
		p := testPod(name)
		p.Spec.NodeName = "n1"
		p.Spec.Tolerations = tol
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, _ := pods.Get(ctx, name, metav1.GetOptions{})
		got.Status.Phase = corev1.PodRunning
		got.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := pods.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound("default-toleration") // 300 s, from admission
	bound("short-toleration", corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)})
	bound("forever", corev1.Toleration{Operator: corev1.TolerationOpExists})

	readyStatus := func() corev1.ConditionStatus {
		n, _ := nodes.Get(ctx, "n1", metav1.GetOptions{})
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return ""
	}
	tainted := func(effect corev1.TaintEffect) bool {
		n, _ := nodes.Get(ctx, "n1", metav1.GetOptions{})
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable && t.Effect == effect })
	}
	// step moves the clock by d, n2 renewing its Lease every 10 s meanwhile while it is alive.
	step := func(d time.Duration) {
		for d > 0 {
			s := min(d, 10*time.Second)
			if n2Alive {
				renewN2()
				time.Sleep(50 * time.Millisecond) // the server sees the renewal before the clock moves
			}
			clk.Step(s)
			d -= s
		}
		time.Sleep(300 * time.Millisecond) // let the pass the tick wakes run
	}
	step(time.Second)
	step(30 * time.Second)
	if s := readyStatus(); s != corev1.ConditionTrue {
		t.Fatalf("node Ready %q 31 s after its heartbeat, want True", s)
	}
	step(15 * time.Second)
	eventually(t, "node Unknown after the grace period", func() bool { return readyStatus() == corev1.ConditionUnknown })
	eventually(t, "unreachable taints", func() bool { return tainted(corev1.TaintEffectNoSchedule) && tainted(corev1.TaintEffectNoExecute) })
	eventually(t, "pods marked not Ready", func() bool {
		p, _ := pods.Get(ctx, "default-toleration", metav1.GetOptions{})
		return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse
		})
	})
	deleting := func(name string) bool {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil
	}
	step(35 * time.Second)
	eventually(t, "the pod tolerating 30 s evicted", func() bool { return deleting("short-toleration") })
	p, _ := pods.Get(ctx, "short-toleration", metav1.GetOptions{})
	if p != nil && !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.DisruptionTarget && c.Reason == "DeletionByTaintManager"
	}) {
		t.Errorf("evicted pod has no DisruptionTarget condition: %+v", p.Status.Conditions)
	}
	if deleting("default-toleration") || deleting("forever") {
		t.Fatal("a pod still tolerating the taint was evicted")
	}
	// The kubelet comes back before 300 s: Ready, untainted, its pods kept.
	heartbeat()
	eventually(t, "node Ready again", func() bool { return readyStatus() == corev1.ConditionTrue })
	eventually(t, "unreachable taints removed", func() bool { return !tainted(corev1.TaintEffectNoSchedule) && !tainted(corev1.TaintEffectNoExecute) })
	step(5 * time.Minute)
	if deleting("default-toleration") || deleting("forever") {
		t.Fatal("a pod on a node that came back was evicted")
	}
	// Silent again, for good: the default toleration runs out.
	step(time.Minute)
	eventually(t, "node Unknown again", func() bool { return readyStatus() == corev1.ConditionUnknown })
	step(301 * time.Second)
	eventually(t, "the pod with the default toleration evicted", func() bool { return deleting("default-toleration") })
	if deleting("forever") {
		t.Fatal("a pod tolerating the taint forever was evicted")
	}

	// n2 goes silent too: no node is Ready, which is likelier the server's own fault than both nodes', and
	// upstream evicts nothing then ("master disruption mode"): the NoExecute taints go, the NoSchedule ones
	// stay, and a pod tolerating unreachable for 30 s bound now stays far longer.
	n2Alive = false
	bound("short-toleration-2", corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)})
	step(time.Minute)
	eventually(t, "no NoExecute taint left, NoSchedule kept", func() bool {
		return !tainted(corev1.TaintEffectNoExecute) && tainted(corev1.TaintEffectNoSchedule)
	})
	step(10 * time.Minute)
	if deleting("short-toleration-2") {
		t.Fatal("a pod was evicted while no node was Ready")
	}
	if n, _ := nodes.Get(ctx, "n2", metav1.GetOptions{}); slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute
	}) {
		t.Fatalf("n2 got a NoExecute taint while no node was Ready: %v", n.Spec.Taints)
	}
	// n2 comes back: n1, still Unknown, is tainted NoExecute again, and the 30 s toleration counts from then.
	heartbeatOf("n2")
	n2Alive = true
	step(time.Second)
	eventually(t, "n1 tainted NoExecute again", func() bool { return tainted(corev1.TaintEffectNoExecute) })
	step(10 * time.Second)
	if deleting("short-toleration-2") {
		t.Fatal("a pod tolerating 30 s evicted 10 s after the taint")
	}
	step(25 * time.Second)
	eventually(t, "the pod tolerating 30 s evicted 30 s after the taint came back", func() bool { return deleting("short-toleration-2") })
}

// Nodes get pod CIDRs from the cluster CIDR; a deleted node's block goes to the next node.
func TestNodePodCIDRs(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *Config) { c.ClusterCIDR = "10.244.0.0/16" })
	ctx := ctxT(t)
	nodes := ts.client.CoreV1().Nodes()
	create := func(name string) {
		t.Helper()
		if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cidrOf := func(name string) func() bool {
		return func() bool {
			n, err := nodes.Get(ctx, name, metav1.GetOptions{})
			return err == nil && n.Spec.PodCIDR != "" && slices.Equal(n.Spec.PodCIDRs, []string{n.Spec.PodCIDR})
		}
	}
	create("n1")
	eventually(t, "n1's pod CIDR", cidrOf("n1"))
	create("n2")
	eventually(t, "n2's pod CIDR", cidrOf("n2"))
	n1, _ := nodes.Get(ctx, "n1", metav1.GetOptions{})
	n2, _ := nodes.Get(ctx, "n2", metav1.GetOptions{})
	if n1.Spec.PodCIDR != "10.244.0.0/24" || n2.Spec.PodCIDR != "10.244.1.0/24" {
		t.Fatalf("pod CIDRs %q and %q", n1.Spec.PodCIDR, n2.Spec.PodCIDR)
	}
	if err := nodes.Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create("n3")
	eventually(t, "n3's pod CIDR", cidrOf("n3"))
	if n3, _ := nodes.Get(ctx, "n3", metav1.GetOptions{}); n3.Spec.PodCIDR != "10.244.0.0/24" {
		t.Fatalf("n3 got %q, want the deleted node's 10.244.0.0/24", n3.Spec.PodCIDR)
	}
}
