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
)

// Guaranteed, Burstable and BestEffort pods, and a pod with pod-level resources, land under their QoS
// cgroups with upstream's values in the kernel's cgroup v1 files, and their cgroups are gone after deletion.
func TestQoSCgroupsV1(t *testing.T) {
	n := startNode(t)
	guaranteed := busyboxPod("guaranteed", "sleep", "3600")
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	burstable := busyboxPod("burstable", "sleep", "3600")
	burstable.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
	}
	besteffort := busyboxPod("besteffort", "sleep", "3600")
	// Pod-level resources (spec.resources, on in 1.35): limits alone, for the whole pod, whose containers set
	// none. The API server defaults the pod-level requests to them, so the pod is Guaranteed, and its cgroup
	// gets the pod-level values.
	podLevel := busyboxPod("podlevel", "sleep", "3600")
	podLevel.Spec.Resources = &v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("96Mi")}}

	type want struct {
		pod   *v1.Pod
		class v1.PodQOSClass
		dir   string // under kubepods, before pod<uid>
		files map[string]string
	}
	cases := []*want{
		{guaranteed, v1.PodQOSGuaranteed, "", map[string]string{
			"cpu/cpu.shares": "102", "cpu/cpu.cfs_quota_us": "10000", "cpu/cpu.cfs_period_us": "100000",
			"memory/memory.limit_in_bytes": fmt.Sprint(64 << 20)}},
		{burstable, v1.PodQOSBurstable, "burstable/", map[string]string{
			"cpu/cpu.shares": "51", "memory/memory.limit_in_bytes": fmt.Sprint(128 << 20)}},
		{besteffort, v1.PodQOSBestEffort, "besteffort/", map[string]string{"cpu/cpu.shares": "2"}},
		{podLevel, v1.PodQOSGuaranteed, "", map[string]string{
			"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "50000", "memory/memory.limit_in_bytes": fmt.Sprint(96 << 20)}},
	}
	for _, c := range cases {
		c.pod = n.createPod(c.pod)
	}
	for _, c := range cases {
		p := n.waitPod(c.pod.Name, 60*time.Second, "pod Ready", ready)
		if p.Status.QOSClass != c.class {
			t.Errorf("%s: qosClass %s, want %s", p.Name, p.Status.QOSClass, c.class)
		}
		for file, value := range c.files {
			ctrl, name, _ := strings.Cut(file, "/")
			path := filepath.Join("/sys/fs/cgroup", ctrl, "kubepods", c.dir+"pod"+string(p.UID), name)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: %v", p.Name, err)
				continue
			}
			if strings.TrimSpace(string(got)) != value {
				t.Errorf("%s: %s = %s, want %s", p.Name, path, strings.TrimSpace(string(got)), value)
			}
		}
		// The container's own cgroup sits under its pod's.
		ctrs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/cpu/kubepods", c.dir+"pod"+string(p.UID), "*", "cgroup.procs"))
		if len(ctrs) < 2 { // pause and the app container
			t.Errorf("%s: container cgroups under the pod: %v", p.Name, ctrs)
		}
	}
	// The burstable class's weight follows its pods' requests.
	if got, _ := os.ReadFile("/sys/fs/cgroup/cpu/kubepods/burstable/cpu.shares"); strings.TrimSpace(string(got)) == "" {
		t.Errorf("burstable cpu.shares unreadable")
	}
	for _, c := range cases {
		if err := n.client.CoreV1().Pods("default").Delete(context.Background(), c.pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		eventually(t, 30*time.Second, c.pod.Name+" cgroups removed", func() error {
			dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods/" + c.dir + "pod" + string(c.pod.UID))
			if len(dirs) > 0 {
				return fmt.Errorf("left: %v", dirs)
			}
			return nil
		})
	}
}
