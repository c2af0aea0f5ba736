package eviction

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// A pod's ephemeral-storage request is summed as admission sums a pod's requests (upstream's PodRequests):
// sidecars (restartable init containers) run beside the app containers and add to them; a plain init
// container runs alone beside the sidecars started before it; the overhead is added.
func TestEphemeralStorageRequest(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	ctr := func(name string, q int64, sidecar bool) v1.Container {
		c := v1.Container{Name: name, Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceEphemeralStorage: *resource.NewQuantity(q, resource.BinarySI)}}}
		if sidecar {
			c.RestartPolicy = &always
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		apps     []v1.Container
		inits    []v1.Container
		overhead int64
		want     int64
	}{
		{name: "app containers add up", apps: []v1.Container{ctr("a", 100, false), ctr("b", 200, false)}, want: 300},
		{name: "the largest init container wins when larger", apps: []v1.Container{ctr("a", 100, false)},
			inits: []v1.Container{ctr("i", 500, false)}, want: 500},
		{name: "a sidecar adds to the app containers", apps: []v1.Container{ctr("a", 100, false)},
			inits: []v1.Container{ctr("s", 900, true)}, want: 1000},
		{name: "an init container after a sidecar runs beside it", apps: []v1.Container{ctr("a", 100, false)},
			inits: []v1.Container{ctr("s", 300, true), ctr("i", 900, false)}, want: 1200},
		{name: "the overhead is added", apps: []v1.Container{ctr("a", 100, false)}, overhead: 50, want: 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", 0, 0)
			p.Spec.Containers, p.Spec.InitContainers = tc.apps, tc.inits
			if tc.overhead > 0 {
				p.Spec.Overhead = v1.ResourceList{v1.ResourceEphemeralStorage: *resource.NewQuantity(tc.overhead, resource.BinarySI)}
			}
			if got := request(p, v1.ResourceEphemeralStorage); got != tc.want {
				t.Errorf("ephemeral-storage request %d, want %d", got, tc.want)
			}
		})
	}
}

// Under disk pressure a pod within what it requests, its sidecar's request counted, ranks after a pod that
// uses more than it requests.
func TestRankDiskCountsSidecarRequests(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	eph := func(q int64) v1.ResourceList {
		return v1.ResourceList{v1.ResourceEphemeralStorage: *resource.NewQuantity(q, resource.BinarySI)}
	}
	withSidecar := pod("with-sidecar", 0, 0)
	withSidecar.Spec.Containers[0].Resources.Requests = eph(100)
	withSidecar.Spec.InitContainers = []v1.Container{{Name: "s", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: eph(900)}}}
	plain := pod("plain", 0, 0)
	used := func(uid string, n uint64) statsapi.PodStats {
		return statsapi.PodStats{PodRef: statsapi.PodReference{UID: uid}, EphemeralStorage: &statsapi.FsStats{UsedBytes: u64(n)}}
	}
	s := &statsapi.Summary{Pods: []statsapi.PodStats{used("with-sidecar", 950), used("plain", 20)}}
	pods := []*v1.Pod{withSidecar, plain}
	rank(pods, statsByPod(s), v1.ResourceEphemeralStorage)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	if want := "plain with-sidecar"; strings.Join(got, " ") != want {
		t.Errorf("ranked %v, want %s", got, want)
	}
}
