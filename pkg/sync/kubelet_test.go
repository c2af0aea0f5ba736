package podsync

import (
	"context"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/config"
	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// run starts the kubelet and returns a function that stops it and waits.
func (h *harness) run() func() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	k := h.k
	go func() { done <- k.Run(ctx) }()
	eventually(h.t, "first relist", func() bool { return k.pleg.Healthy() == nil })
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			h.t.Fatal("kubelet did not stop")
		}
	}
}

func (h *harness) apiPod(name string) (*v1.Pod, bool) {
	p, err := h.client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	return p, err == nil
}

func (h *harness) createAPIPod(p *v1.Pod) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func TestKubeletRunsAndDeletesPod(t *testing.T) {
	h := newHarness(t)
	stop := h.run()
	defer stop()
	pod := newPod("u1", "web", "app")
	h.createAPIPod(pod)
	h.src.send(config.Add, pod)
	eventually(t, "pod Running and Ready in the API", func() bool {
		p, ok := h.apiPod("web")
		if !ok || p.Status.Phase != v1.PodRunning {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
	p, _ := h.apiPod("web")
	if p.Status.PodIP == "" || p.Status.HostIP != "192.168.1.2" || p.Status.ContainerStatuses[0].ContainerID == "" {
		t.Errorf("status %+v", p.Status)
	}
	if _, err := os.Stat(h.k.podDir(pod.UID)); err != nil {
		t.Errorf("pod dir: %v", err)
	}

	// Graceful deletion: the API pod gets a deletion timestamp; the kubelet stops everything, cleans up and
	// confirms with grace 0.
	deleting := p.DeepCopy()
	now := metav1.NewTime(h.clock.Now())
	grace := int64(2)
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, &grace
	if _, err := h.client.CoreV1().Pods("ns").Update(context.Background(), deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.src.send(config.Delete, deleting)
	eventually(t, "pod gone from the API", func() bool { _, ok := h.apiPod("web"); return !ok })
	for _, a := range h.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			if g := d.GetDeleteOptions().GracePeriodSeconds; g == nil || *g != 0 {
				t.Errorf("deleted with grace %v", g)
			}
		}
	}
	// The stopped sandbox and containers, and the pod's directories, are removed after the confirmation.
	eventually(t, "no container, sandbox or directory of the pod left", func() bool {
		h.rt.Lock()
		left := len(h.rt.Containers) + len(h.rt.Sandboxes)
		h.rt.Unlock()
		_, dirErr := os.Stat(h.k.podDir(pod.UID))
		_, logErr := os.Stat(h.k.podLogDir(pod))
		return left == 0 && os.IsNotExist(dirErr) && os.IsNotExist(logErr)
	})
}

func TestKubeletRejectsPodThatDoesNotFit(t *testing.T) {
	h := newHarness(t)
	stop := h.run()
	defer stop()
	pod := newPod("u1", "big", "app")
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}
	h.createAPIPod(pod)
	h.src.send(config.Add, pod)
	eventually(t, "pod Failed with OutOfcpu", func() bool {
		p, ok := h.apiPod("big")
		return ok && p.Status.Phase == v1.PodFailed && p.Status.Reason == "OutOfcpu"
	})
	if ev := h.rec.drain(); !hasEvent(ev, "Warning OutOfcpu Node didn't have enough resource: cpu") {
		t.Errorf("events %v", ev)
	}
	if calls := h.rt.GetCalls(); contains(calls, "RunPodSandbox") {
		t.Errorf("rejected pod got a sandbox: %v", calls)
	}
}

func TestKubeletRestartAdoptsRunningPods(t *testing.T) {
	h := newHarness(t)
	stop := h.run()
	pod := newPod("u1", "web", "app")
	h.createAPIPod(pod)
	h.src.send(config.Add, pod)
	eventually(t, "pod running", func() bool { p, ok := h.apiPod("web"); return ok && p.Status.Phase == v1.PodRunning })
	stop()
	before := h.rt.GetCalls()

	// A new kubelet on the same runtime and directories.
	h.k = h.newKubelet(h.k.cfg.RootDir, h.k.cfg.PodLogsDir)
	stop = h.run()
	defer stop()
	p, _ := h.apiPod("web")
	h.src.send(config.Add, p)
	eventually(t, "pod synced by the new kubelet", func() bool {
		for _, s := range h.k.Snapshot() {
			if s.UID == pod.UID && s.Syncs > 0 {
				return true
			}
		}
		return false
	})
	time.Sleep(50 * time.Millisecond)
	for _, c := range h.rt.GetCalls()[len(before):] {
		switch c {
		case "RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "StopPodSandbox":
			t.Fatalf("restarted kubelet called %s", c)
		}
	}
	if p, _ := h.apiPod("web"); p.Status.Phase != v1.PodRunning {
		t.Fatalf("phase %s", p.Status.Phase)
	}
}

func TestKubeletStopsOrphans(t *testing.T) {
	h := newHarness(t)
	// A pod left in the runtime that no source knows.
	other := newHarness(t)
	other.rt, other.img = h.rt, h.img
	other.k = other.newKubelet(t.TempDir(), t.TempDir())
	orphan := newPod("orphan", "gone", "app")
	if _, err := other.sync(orphan); err != nil {
		t.Fatal(err)
	}
	stop := h.run()
	defer stop()
	eventually(t, "orphan removed", func() bool {
		h.clock.Step(housekeepingPeriod)
		h.rt.Lock()
		defer h.rt.Unlock()
		return len(h.rt.Containers)+len(h.rt.Sandboxes) == 0
	})
}

func TestKubeletSourceRemoveStopsPod(t *testing.T) {
	h := newHarness(t)
	stop := h.run()
	defer stop()
	pod := newPod("u1", "web", "app")
	h.src.send(config.Add, pod)
	eventually(t, "container running", func() bool {
		h.rt.Lock()
		defer h.rt.Unlock()
		for _, c := range h.rt.Containers {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return true
			}
		}
		return false
	})
	h.src.send(config.Remove, pod)
	eventually(t, "everything removed", func() bool {
		h.rt.Lock()
		defer h.rt.Unlock()
		return len(h.rt.Containers)+len(h.rt.Sandboxes) == 0
	})
	eventually(t, "worker finished", func() bool {
		s, ok := h.k.workers.state(types.UID("u1"))
		return ok && s == stateFinished
	})
}

func TestHealthy(t *testing.T) {
	h := newHarness(t)
	if h.k.Healthy() == nil {
		t.Fatal("healthy before the first relist")
	}
	stop := h.run()
	defer stop()
	if err := h.k.Healthy(); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestKubeletRunsStaticPodWithMirror(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: static, namespace: ns}\n" +
		"spec: {containers: [{name: app, image: 'busybox:1.35'}]}\n"
	if err := os.WriteFile(dir+"/static.yaml", []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k, err := New(Config{
		NodeName: "node1", RootDir: t.TempDir(), PodLogsDir: t.TempDir(), MaxPods: 110, Client: kubeclienttest.Wrap(h.client), Runtime: h.rt, Images: h.img,
		Clock: h.clock, Recorder: h.rec, ManifestDir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.alloc.Flush() })
	h.k = k
	stop := h.run()
	defer stop()
	eventually(t, "mirror pod Running in the API", func() bool {
		p, ok := h.apiPod("static-node1")
		return ok && p.Annotations[podfacts.AnnotationConfigMirror] != "" && p.Status.Phase == v1.PodRunning
	})
	// Deleting the mirror pod recreates it; the static pod keeps running. The fake clientset's watch does not
	// replay what happened between the list and the watch, as an API server does: delete once it watches.
	eventually(t, "the kubelet watching pods", func() bool {
		for _, a := range h.client.Actions() {
			if a.GetVerb() == "watch" && a.GetResource().Resource == "pods" {
				return true
			}
		}
		return false
	})
	if err := h.client.CoreV1().Pods("ns").Delete(context.Background(), "static-node1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for _, a := range h.client.Actions() {
				t.Logf("action %s %s %s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
			}
			t.Logf("snapshot %+v", h.k.Snapshot())
		}
	}()
	eventually(t, "mirror pod recreated", func() bool {
		h.clock.Step(100 * time.Millisecond) // the next relist lets the worker sync again
		deleted, recreated := false, false
		for _, a := range h.client.Actions() {
			if a.GetResource().Resource != "pods" {
				continue
			}
			deleted = deleted || a.GetVerb() == "delete"
			recreated = recreated || (deleted && a.GetVerb() == "create")
		}
		_, ok := h.apiPod("static-node1")
		return ok && recreated
	})
	if calls := h.rt.GetCalls(); countOf(calls, "RunPodSandbox") != 1 {
		t.Errorf("static pod restarted: %d sandboxes", countOf(calls, "RunPodSandbox"))
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func TestKubeletConfirmsDeletionOfRejectedPod(t *testing.T) {
	h := newHarness(t)
	stop := h.run()
	defer stop()
	pod := newPod("u1", "big", "app")
	pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	h.createAPIPod(pod)
	h.src.send(config.Add, pod)
	eventually(t, "pod Failed with NodeAffinity", func() bool {
		p, ok := h.apiPod("big")
		return ok && p.Status.Phase == v1.PodFailed && p.Status.Reason == "NodeAffinity"
	})
	p, _ := h.apiPod("big")
	now := metav1.NewTime(h.clock.Now())
	p.DeletionTimestamp = &now
	if _, err := h.client.CoreV1().Pods("ns").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.src.send(config.Delete, p)
	eventually(t, "rejected pod deleted", func() bool { _, ok := h.apiPod("big"); return !ok })
}
