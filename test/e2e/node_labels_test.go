//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectl runs the real kubectl as the node's API server's admin.
func (n *node) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	if n.ext != nil {
		t.Fatal("kubectl against a separately run API server is not wired")
	}
	out, err := n.tryKubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return out
}

// tryKubectl runs kubectl as kubectl does, returning its output and error.
func (n *node) tryKubectl(args ...string) (string, error) {
	kc := filepath.Join(n.dir, "admin.kubeconfig")
	if n.cp != nil {
		kc = n.cp.kubeconfig
	}
	out, err := exec.Command(kubectlPath, append([]string{"--kubeconfig", kc}, args...)...).CombinedOutput()
	return string(out), err
}

// The kubelet admits by its real Node: a pod whose nodeSelector matches a --node-labels label or a label an
// admin set later (kubectl label node) runs; a pod bound to the node that does not tolerate a NoExecute taint is rejected with
// upstream's reason. On the standalone node the API server's placement decides the rest: a pod that does not
// tolerate a NoSchedule taint stays Pending.
func TestKubeletAdmitsByItsNode(t *testing.T) {
	parallel(t)
	n := startNode(t, "--node-labels", "disk=ssd,node.kubernetes.io/pool=blue")
	bound := func(p *v1.Pod) *v1.Pod { p.Spec.NodeName = n.name; return p }

	p := busyboxPod("on-ssd", "sleep", "3600")
	p.Spec.NodeSelector = map[string]string{"disk": "ssd", "node.kubernetes.io/pool": "blue"}
	n.createPod(p)
	n.waitPod("on-ssd", 60*time.Second, "the pod on a --node-labels label ready", ready)

	n.kubectl(t, "label", "node", n.name, "zone-x=a")
	p = bound(busyboxPod("in-zone", "sleep", "3600")) // bound by hand: the kubelet's own admission decides
	p.Spec.NodeSelector = map[string]string{"zone-x": "a"}
	time.Sleep(time.Second) // the kubelet's watch of its Node delivers the label
	n.createPod(p)
	n.waitPod("in-zone", 60*time.Second, "the pod on a label set by an admin ready", ready)

	n.kubectl(t, "taint", "node", n.name, "evict=yes:NoExecute")
	time.Sleep(time.Second)
	n.createPod(bound(busyboxPod("untolerated", "sleep", "3600")))
	rejected := n.waitPod("untolerated", 30*time.Second, "the pod rejected", func(p *v1.Pod) error {
		if p.Status.Phase != v1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if rejected.Status.Reason != "TaintToleration" ||
		rejected.Status.Message != "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate" {
		t.Errorf("rejection: %q %q", rejected.Status.Reason, rejected.Status.Message)
	}
	tolerant := bound(busyboxPod("tolerant", "sleep", "3600"))
	tolerant.Spec.Tolerations = []v1.Toleration{{Key: "evict", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	n.createPod(tolerant)
	n.waitPod("tolerant", 60*time.Second, "the tolerating pod ready", ready)
	// Pods that ran before the taint keep running: upstream's kubelet checks taints only at admission (the
	// taint eviction controller, not the kubelet, evicts running pods). Checked on the real control plane,
	// where no controller manager runs: the lightweight API server runs the taint eviction controller, which
	// deletes the pod, as kube-controller-manager's would.
	if n.cp != nil {
		if got := n.waitPod("on-ssd", time.Second, "", func(*v1.Pod) error { return nil }); got.Status.Phase != v1.PodRunning {
			t.Errorf("a pod that ran before the taint: %s", got.Status.Phase)
		}
	} else {
		eventually(t, 60*time.Second, "the API server's taint eviction controller deleting the untolerating pod", func() error {
			if _, err := n.client.CoreV1().Pods("default").Get(context.Background(), "on-ssd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	}

	if n.cp != nil {
		return // no placement on the real control plane here: no scheduler runs
	}
	n.kubectl(t, "taint", "node", n.name, "evict-", "dedicated=gpu:NoSchedule")
	time.Sleep(time.Second)
	n.createPod(busyboxPod("not-placed", "sleep", "3600"))
	time.Sleep(3 * time.Second)
	got := n.waitPod("not-placed", time.Second, "", func(*v1.Pod) error { return nil })
	if got.Spec.NodeName != "" || got.Status.Phase != v1.PodPending {
		t.Errorf("a pod that does not tolerate NoSchedule: node %q phase %s", got.Spec.NodeName, got.Status.Phase)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == v1.PodScheduled && (c.Status != v1.ConditionFalse || !strings.Contains(c.Message, "taint")) {
			t.Errorf("PodScheduled: %s %q", c.Status, c.Message)
		}
	}
}
