//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Memory pressure on real cgroups: the kubelet's memory.available threshold is set a little below what the
// node has available, a BestEffort pod then allocates well past it and is evicted (Failed, reason Evicted,
// the signal in its message, an Evicted event), the Guaranteed pod beside it keeps running, a BestEffort pod
// created under pressure is refused, and MemoryPressure turns True, then False after the transition period.
func TestMemoryPressureEviction(t *testing.T) {
	n := startNode(t)
	var sum statsapi.Summary
	eventually(t, 30*time.Second, "node memory in /stats/summary", func() error {
		data, err := n.proxyGet("stats/summary") // retried until the node has registered
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &sum); err != nil {
			return err
		}
		if sum.Node.Memory == nil || sum.Node.Memory.AvailableBytes == nil {
			return fmt.Errorf("no node memory yet")
		}
		return nil
	})
	// MiB: the threshold below what is available, and what the pod allocates. The margin is wide because the
	// host's other users (a 2 GiB VM booting beside the suite) take up to 2 GiB more meanwhile: with 500 MiB, once
	// the hog was gone the node was still under the threshold and the Guaranteed pod was evicted in turn.
	const margin, hog = 3000, 6000
	threshold := int64(*sum.Node.Memory.AvailableBytes>>20) - margin
	if threshold < 200 {
		t.Fatalf("the host has %d MiB available, too little to test memory pressure", *sum.Node.Memory.AvailableBytes>>20)
	}
	t.Logf("memory.available %d MiB; threshold %d MiB", *sum.Node.Memory.AvailableBytes>>20, threshold)
	n.restartWith(fmt.Sprintf("--eviction-hard=memory.available<%dMi", threshold), "--eviction-pressure-transition-period=30s")

	guaranteed := busyboxPod("guaranteed", "sleep", "3600")
	q := v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: q, Limits: q}
	n.createPod(guaranteed)
	n.waitPod("guaranteed", 60*time.Second, "guaranteed Ready", ready)

	// The hog fills a memory-backed emptyDir: tmpfs pages are charged to its container's cgroup, written at
	// once (a shell variable grew at 70 MB/s) and held until the volume is unmounted, with no OOM kill.
	hogPod := busyboxPod("hog", "sh", "-c", fmt.Sprintf(
		`dd if=/dev/zero of=/fill/zeros bs=1M count=%d && echo filled; while true; do sleep 1; done`, hog))
	hogPod.Spec.Volumes = []v1.Volume{{Name: "fill", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}}
	hogPod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "fill", MountPath: "/fill"}}
	n.createPod(hogPod)
	var sawPressure bool
	evicted := n.waitPod("hog", 90*time.Second, "hog evicted", func(p *v1.Pod) error {
		sawPressure = sawPressure || nodeCondition(t, n, v1.NodeMemoryPressure) == v1.ConditionTrue
		return inPhase(v1.PodFailed, "Evicted")(p)
	})
	if !strings.Contains(evicted.Status.Message, "The node was low on resource: memory.") ||
		!strings.Contains(evicted.Status.Message, fmt.Sprintf("Threshold quantity: %dMi", threshold)) {
		t.Errorf("eviction message %q does not name the signal and the threshold", evicted.Status.Message)
	}
	var disruption bool
	for _, c := range evicted.Status.Conditions {
		disruption = disruption || c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonTerminationByKubelet
	}
	if !disruption {
		t.Errorf("no DisruptionTarget condition: %+v", evicted.Status.Conditions)
	}
	eventually(t, 30*time.Second, "Evicted event", func() error {
		for _, e := range n.events(t, "hog") {
			if e.Reason == "Evicted" && strings.Contains(e.Message, "memory") {
				return nil
			}
		}
		return fmt.Errorf("no Evicted event")
	})
	if !sawPressure {
		eventually(t, 20*time.Second, "MemoryPressure True", func() error {
			if c := nodeCondition(t, n, v1.NodeMemoryPressure); c != v1.ConditionTrue {
				return fmt.Errorf("MemoryPressure %s", c)
			}
			return nil
		})
	}
	// The standalone node's API server taints the node, as upstream's node lifecycle controller does, so its
	// placement sends no more pods there.
	if n.cp == nil {
		eventually(t, 30*time.Second, "memory-pressure taint", func() error {
			node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == v1.TaintNodeMemoryPressure && taint.Effect == v1.TaintEffectNoSchedule {
					return nil
				}
			}
			return fmt.Errorf("taints %v", node.Spec.Taints)
		})
	}
	// Under pressure a BestEffort pod bound to the node is refused; the Guaranteed pod runs on, never
	// restarted.
	latecomer := busyboxPod("latecomer", "sleep", "3600")
	latecomer.Spec.NodeName = n.name
	n.createPod(latecomer)
	late := n.waitPod("latecomer", 30*time.Second, "latecomer refused", inPhase(v1.PodFailed, ""))
	if late.Status.Reason != "Evicted" || !strings.Contains(late.Status.Message, "MemoryPressure") {
		t.Errorf("latecomer: reason %q message %q, want Evicted naming MemoryPressure", late.Status.Reason, late.Status.Message)
	}
	g := n.waitPod("guaranteed", 10*time.Second, "guaranteed still Ready", ready)
	if rc := g.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("the Guaranteed pod restarted %d times", rc)
	}
	eventually(t, 90*time.Second, "MemoryPressure False after the transition period, and no taint", func() error {
		if c := nodeCondition(t, n, v1.NodeMemoryPressure); c != v1.ConditionFalse {
			return fmt.Errorf("MemoryPressure %s", c)
		}
		node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == v1.TaintNodeMemoryPressure {
				return fmt.Errorf("still tainted %v", taint)
			}
		}
		return nil
	})
	n.waitPod("guaranteed", 10*time.Second, "guaranteed still Ready", ready)
}

// nodeCondition reads one of the node's conditions through the API ("" when it has none).
func nodeCondition(t *testing.T, n *node, typ v1.NodeConditionType) v1.ConditionStatus {
	t.Helper()
	node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, c := range node.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// A pod that writes beyond its limits.ephemeral-storage is evicted alone: Failed, Evicted, the limit in its
// message; the pod beside it, which writes as much without a limit, keeps running.
func TestEphemeralStorageLimitEviction(t *testing.T) {
	parallel(t)
	n := startNode(t)
	writer := busyboxPod("writer", "sh", "-c", "dd if=/dev/zero of=/big bs=1M count=30 && sleep 3600")
	writer.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Mi")}
	n.createPod(writer)
	n.createPod(busyboxPod("bystander", "sh", "-c", "dd if=/dev/zero of=/big bs=1M count=30 && sleep 3600"))
	n.waitPod("bystander", 60*time.Second, "bystander Ready", ready)
	// Filesystem usage is measured once a minute (and when a pod is first seen): allow two measurements.
	evicted := n.waitPod("writer", 150*time.Second, "writer evicted", inPhase(v1.PodFailed, "Evicted"))
	if !strings.Contains(evicted.Status.Message, "10Mi") || !strings.Contains(evicted.Status.Message, "ephemeral") {
		t.Errorf("message %q does not name the ephemeral storage limit", evicted.Status.Message)
	}
	b := n.waitPod("bystander", 10*time.Second, "bystander still Ready", ready)
	if b.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the bystander restarted")
	}
	if c := nodeCondition(t, n, v1.NodeDiskPressure); c != v1.ConditionFalse {
		t.Errorf("DiskPressure %q: a pod over its own limit is not node pressure", c)
	}
}

// inPhase is a waitPod condition: the pod is in phase, with reason when one is given.
func inPhase(phase v1.PodPhase, reason string) func(*v1.Pod) error {
	return func(p *v1.Pod) error {
		if p.Status.Phase != phase || reason != "" && p.Status.Reason != reason {
			return fmt.Errorf("phase %s reason %q", p.Status.Phase, p.Status.Reason)
		}
		return nil
	}
}
