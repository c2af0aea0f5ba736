//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Extended resources as upstream counts them: a pod asking for one no node has stays Pending (Insufficient);
// once an administrator advertises two dongles on the Node's status (upstream's documented way), the kubelet
// keeps them there, a pod asking for two runs, a third dongle is refused by placement (Pending) and, for a pod
// bound to the node by hand, by the kubelet (Failed, OutOfexample.com/dongle, as upstream's admission says).
func TestExtendedResources(t *testing.T) {
	parallel(t)
	n := startNode(t)
	ctx := context.Background()
	asking := func(name string, res v1.ResourceName, count string) *v1.Pod {
		p := busyboxPod(name, "sleep", "3600")
		l := v1.ResourceList{res: resource.MustParse(count)}
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: l, Limits: l}
		return p
	}
	n.createPod(asking("gpu", "example.com/gpu", "1"))
	n.waitPod("gpu", 30*time.Second, "Pending: no node has the resource", pending("gpu", "Insufficient example.com/gpu"))

	patch := `{"status":{"capacity":{"example.com/dongle":"2"},"allocatable":{"example.com/dongle":"2"}}}`
	if _, err := n.client.CoreV1().Nodes().Patch(ctx, n.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("advertise dongles: %v", err)
	}
	n.createPod(asking("two", "example.com/dongle", "2"))
	n.waitPod("two", 60*time.Second, "the pod with two dongles Ready", ready)

	n.createPod(asking("third", "example.com/dongle", "1"))
	n.waitPod("third", 30*time.Second, "Pending: both dongles taken", pending("third", "Insufficient example.com/dongle"))

	bound := asking("bound", "example.com/dongle", "1")
	bound.Spec.NodeName = n.name
	n.createPod(bound)
	rejected := n.waitPod("bound", 30*time.Second, "rejected by the kubelet", inPhase(v1.PodFailed, "OutOfexample.com/dongle"))
	if want := "Node didn't have enough resource: example.com/dongle, requested: 1, used: 2, capacity: 2"; rejected.Status.Message != want {
		t.Errorf("message %q, want %q", rejected.Status.Message, want)
	}

	// A restarted kubelet posts its whole status: what the administrator advertised stays.
	restarted := time.Now().Add(-time.Second).Truncate(time.Second)
	n.restart()
	eventually(t, 60*time.Second, "the dongles still advertised once the restarted kubelet posted its status", func() error {
		nd, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		posted := false
		for _, c := range nd.Status.Conditions {
			posted = posted || c.Type == v1.NodeReady && !c.LastHeartbeatTime.Time.Before(restarted)
		}
		if q, ok := nd.Status.Allocatable["example.com/dongle"]; !posted || !ok || q.Value() != 2 {
			return fmt.Errorf("status posted since the restart %v, allocatable %v", posted, nd.Status.Allocatable)
		}
		return nil
	})
	if p, err := n.client.CoreV1().Pods("default").Get(ctx, "two", metav1.GetOptions{}); err != nil || ready(p) != nil {
		t.Errorf("the pod with two dongles after the restart: %v", err)
	}
}

// pending is a waitPod condition: the pod is not placed, its PodScheduled condition false with reason in
// its message.
func pending(name, reason string) func(*v1.Pod) error {
	return func(p *v1.Pod) error {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && strings.Contains(c.Message, reason) {
				return nil
			}
		}
		return fmt.Errorf("%s: phase %s, node %q, conditions %v", name, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
	}
}
