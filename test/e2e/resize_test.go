//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A running pod resized through pods/resize gets its new CPU and memory limits in its container's and its
// pod's cgroups without a restart, and reports them; a resize beyond the node stays Infeasible and changes
// nothing; a resource with resizePolicy RestartContainer restarts the container with its new limit. On both
// runtime backends, and (under TestControlPlane) against kube-apiserver.
func TestKubeletInPlaceResize(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		pod := busyboxPod("resize", "sleep", "3600")
		pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
			Name: "restarts", Image: busyboxImage, Command: []string{"sleep", "3600"},
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
			},
			ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}},
		})
		n.createPod(pod)
		before := n.waitPod("resize", 60*time.Second, "pod Ready", ready)
		ids := map[string]string{}
		for _, cs := range before.Status.ContainerStatuses {
			ids[cs.Name] = cs.ContainerID
			if cs.Resources == nil || cs.AllocatedResources == nil {
				t.Fatalf("%s reports no resources: %+v", cs.Name, cs)
			}
		}

		patch := `{"spec":{"containers":[` +
			`{"name":"main","resources":{"requests":{"cpu":"200m"},"limits":{"cpu":"400m","memory":"128Mi"}}},` +
			`{"name":"restarts","resources":{"limits":{"memory":"96Mi"}}}]}}`
		if _, err := n.client.CoreV1().Pods("default").Patch(context.Background(), "resize", types.StrategicMergePatchType,
			[]byte(patch), metav1.PatchOptions{}, "resize"); err != nil {
			t.Fatalf("resize: %v", err)
		}
		after := n.waitPod("resize", 60*time.Second, "resize done", func(p *v1.Pod) error {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
					return fmt.Errorf("%s: %s %s", c.Type, c.Reason, c.Message)
				}
			}
			for _, cs := range p.Status.ContainerStatuses {
				if !cs.Ready {
					return fmt.Errorf("%s not ready", cs.Name)
				}
				want := map[string]string{"main": "128Mi", "restarts": "96Mi"}[cs.Name]
				if cs.Resources == nil || cs.Resources.Limits.Memory().Cmp(resource.MustParse(want)) != 0 {
					return fmt.Errorf("%s resources %v, want memory limit %s", cs.Name, cs.Resources, want)
				}
			}
			return nil
		})
		for _, cs := range after.Status.ContainerStatuses {
			switch cs.Name {
			case "main":
				if cs.ContainerID != ids["main"] || cs.RestartCount != 0 {
					t.Errorf("main was restarted: %s -> %s, restarts %d", ids["main"], cs.ContainerID, cs.RestartCount)
				}
				if q := cs.AllocatedResources[v1.ResourceCPU]; q.MilliValue() != 200 {
					t.Errorf("main allocatedResources %v", cs.AllocatedResources)
				}
			case "restarts":
				if cs.ContainerID == ids["restarts"] || cs.RestartCount != 1 {
					t.Errorf("restarts was not restarted: %s -> %s, restarts %d", ids["restarts"], cs.ContainerID, cs.RestartCount)
				}
			}
		}
		if after.Status.ObservedGeneration != after.Generation {
			t.Errorf("observedGeneration %d, generation %d", after.Status.ObservedGeneration, after.Generation)
		}
		main := containerCgroup(t, after, ids["main"])
		for file, want := range map[string]string{
			"cpu/" + main + "/cpu.cfs_quota_us":                       "40000",
			"cpu/" + main + "/cpu.shares":                             "204",
			"memory/" + main + "/memory.limit_in_bytes":               fmt.Sprint(128 << 20),
			"cpu/" + filepath.Dir(main) + "/cpu.cfs_quota_us":         "50000", // 400m + 100m
			"memory/" + filepath.Dir(main) + "/memory.limit_in_bytes": fmt.Sprint(224 << 20),
		} {
			if got := readTrim(t, filepath.Join("/sys/fs/cgroup", file)); got != want {
				t.Errorf("%s = %s, want %s", file, got, want)
			}
		}
		var started, completed bool
		for _, e := range n.events(t, "resize") {
			started = started || e.Reason == "ResizeStarted"
			completed = completed || e.Reason == "ResizeCompleted" && strings.HasPrefix(e.Message, "Pod resize completed: ")
		}
		if !started || !completed {
			t.Errorf("events ResizeStarted %v, ResizeCompleted %v", started, completed)
		}

		// A memory limit below what the container holds (40 MiB of shared memory, which reclaim cannot free):
		// not passed to the runtime; the resize stays in progress with the limit and the usage, as upstream's
		// kubelet reports it, and the container keeps its limit.
		hog := busyboxPod("hog", "sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1M count=40 2>/dev/null && touch /tmp/full && exec sleep 3600")
		hog.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("96Mi")},
		}
		hog.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/full"), PeriodSeconds: 1}
		n.createPod(hog)
		held := n.waitPod("hog", 60*time.Second, "hog Ready with its memory filled", ready)
		hogCgroup := containerCgroup(t, held, held.Status.ContainerStatuses[0].ContainerID)
		if _, err := n.client.CoreV1().Pods("default").Patch(context.Background(), "hog", types.StrategicMergePatchType,
			[]byte(`{"spec":{"containers":[{"name":"main","resources":{"limits":{"memory":"20Mi"}}}]}}`),
			metav1.PatchOptions{}, "resize"); err != nil {
			t.Fatalf("resize: %v", err)
		}
		n.waitPod("hog", 30*time.Second, "PodResizeInProgress Error naming the usage", func(p *v1.Pod) error {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodResizeInProgress && c.Reason == v1.PodReasonError &&
					strings.Contains(c.Message, "memory limit (20971520) below current usage (") {
					return nil
				}
			}
			return fmt.Errorf("conditions %v", p.Status.Conditions)
		})
		if got := readTrim(t, filepath.Join("/sys/fs/cgroup/memory", hogCgroup, "memory.limit_in_bytes")); got != fmt.Sprint(96<<20) {
			t.Errorf("the refused resize changed the memory limit to %s", got)
		}

		// More CPU than the node has: Infeasible, nothing changes (last: placement counts what the pod asks for).
		if _, err := n.client.CoreV1().Pods("default").Patch(context.Background(), "resize", types.StrategicMergePatchType,
			[]byte(`{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"100"},"limits":{"cpu":"100"}}}]}}`),
			metav1.PatchOptions{}, "resize"); err != nil {
			t.Fatalf("resize: %v", err)
		}
		n.waitPod("resize", 30*time.Second, "PodResizePending Infeasible", func(p *v1.Pod) error {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodResizePending && c.Reason == "Infeasible" &&
					strings.HasPrefix(c.Message, "Node didn't have enough capacity: cpu, requested: 100") {
					return nil
				}
			}
			return fmt.Errorf("conditions %v", p.Status.Conditions)
		})
		if got := readTrim(t, filepath.Join("/sys/fs/cgroup/cpu", main, "cpu.cfs_quota_us")); got != "40000" {
			t.Errorf("an infeasible resize changed the quota to %s", got)
		}

	})
}

// containerCgroup returns the container's cgroup path below the cpu controller's root, found under its pod's.
func containerCgroup(t *testing.T, pod *v1.Pod, containerID string) string {
	t.Helper()
	_, id, _ := strings.Cut(containerID, "://")
	// kubepods/pod<uid>, kubepods/<qos>/pod<uid>, under the cgroup root "/" or one more level.
	var matches []string
	for _, parents := range []string{"*", "*/*", "*/*/*"} {
		more, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/cpu", parents, "pod"+string(pod.UID), "*"+id+"*"))
		matches = append(matches, more...)
	}
	if len(matches) != 1 {
		t.Fatalf("cgroup of container %s: %v", id, matches)
	}
	rel, _ := filepath.Rel("/sys/fs/cgroup/cpu", matches[0])
	return rel
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%v", err)
	}
	return strings.TrimSpace(string(b))
}
