//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A node whose kubelet dies is marked Unknown once its Lease runs out and tainted unreachable NoSchedule
// (not NoExecute: it is the only node, and with no node Ready nothing is evicted, as upstream); its pod runs
// on, marked not Ready, and a new pod is not placed there. The restarted kubelet makes the node Ready and
// untainted again, the pod Ready with the same containers and no restarts, and the waiting pod is placed
// and runs. The periods are shortened to keep the test short (the API server's
// --node-monitor-grace-period 12s, the kubelet's nodeLeaseDurationSeconds 8; both default to 40 s).
func TestNodeLifecycleKubeletDies(t *testing.T) {
	parallel(t)
	nodeKC := filepath.Join(t.TempDir(), "node.kubeconfig")
	api := startAPIServer(t, "", "--node-kubeconfig", "e2e-node="+nodeKC, "--node-monitor-grace-period", "12s")
	eventually(t, 30*time.Second, "the node kubeconfig", func() error { _, err := os.Stat(nodeKC); return err })
	cfg := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnodeLeaseDurationSeconds: 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNodeJoining(t, api, nodeKC, "--config", cfg)
	p := busyboxPod("lifecycle", "sleep", "3600")
	p.Spec.NodeName = n.name
	n.createPod(p)
	n.waitPod(p.Name, 90*time.Second, "pod ready", ready)
	before := n.podStates(t, []string{p.Name})

	readyCondition := func() (v1.ConditionStatus, []v1.Taint) { return nodeReadyAndTaints(n.client, n.name) }
	unreachable := func(taints []v1.Taint, effect v1.TaintEffect) bool {
		return slices.ContainsFunc(taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeUnreachable && t.Effect == effect })
	}
	// A live kubelet keeps its node Ready past the grace period: its Lease renewals count.
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if s, taints := readyCondition(); s != v1.ConditionTrue || len(taints) > 0 {
			t.Fatalf("a node with a live kubelet: Ready %q, taints %v", s, taints)
		}
	}

	n.kill()
	died := time.Now()
	eventually(t, 30*time.Second, "the node Unknown and tainted unreachable NoSchedule, not NoExecute", func() error {
		s, taints := readyCondition()
		if s != v1.ConditionUnknown || !unreachable(taints, v1.TaintEffectNoSchedule) || unreachable(taints, v1.TaintEffectNoExecute) {
			return fmt.Errorf("Ready %q, taints %v", s, taints)
		}
		return nil
	})
	t.Logf("node Unknown %v after its kubelet died (grace period 12 s, lease 8 s)", time.Since(died).Round(time.Second))
	n.waitPod(p.Name, 10*time.Second, "pod marked not Ready", func(p *v1.Pod) error {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionFalse {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", p.Status.Conditions)
	})
	waiting := busyboxPod("placed-later", "sleep", "3600")
	n.createPod(waiting)
	n.waitPod(waiting.Name, 15*time.Second, "new pod not placed on the unreachable node", func(p *v1.Pod) error {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && strings.Contains(c.Message, "0/1 nodes are available") {
				return nil
			}
		}
		return fmt.Errorf("node %q, conditions %v", p.Spec.NodeName, p.Status.Conditions)
	})

	n.launch()
	eventually(t, 60*time.Second, "the node Ready and untainted again", func() error {
		if s, taints := readyCondition(); s != v1.ConditionTrue || unreachable(taints, v1.TaintEffectNoSchedule) || unreachable(taints, v1.TaintEffectNoExecute) {
			return fmt.Errorf("Ready %q, taints %v", s, taints)
		}
		return nil
	})
	n.waitPod(p.Name, 60*time.Second, "pod Ready again", ready)
	if after := n.podStates(t, []string{p.Name}); after[p.Name] != before[p.Name] {
		t.Fatalf("pod before the kubelet died: %s\nafter it came back: %s", before[p.Name], after[p.Name])
	}
	n.waitPod(waiting.Name, 90*time.Second, "the waiting pod placed and running", ready)
}

// nodeReadyAndTaints reads a Node's Ready condition status and its taints ("" and none when it cannot).
func nodeReadyAndTaints(client kubernetes.Interface, name string) (v1.ConditionStatus, []v1.Taint) {
	node, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", nil
	}
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status, node.Spec.Taints
		}
	}
	return "", node.Spec.Taints
}
