package eviction

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestLocalStorageViolations(t *testing.T) {
	mk := func(name string, mutate func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}, {Name: "d"}}}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	limit := func(c *v1.Container, q string) {
		c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(q)}
	}
	sizeLimit := resource.MustParse("10Mi")
	stats := func(uid string, pod, rootfs, logs, vol uint64) statsapi.PodStats {
		return statsapi.PodStats{PodRef: statsapi.PodReference{UID: uid},
			EphemeralStorage: &statsapi.FsStats{UsedBytes: u64(pod)},
			VolumeStats:      []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: u64(vol)}}},
			Containers: []statsapi.ContainerStats{
				{Name: "c", Rootfs: &statsapi.FsStats{UsedBytes: u64(rootfs)}, Logs: &statsapi.FsStats{UsedBytes: u64(logs)}},
				{Name: "d", Rootfs: &statsapi.FsStats{UsedBytes: u64(0)}, Logs: &statsapi.FsStats{UsedBytes: u64(0)}}}}
	}
	withScratch := func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &sizeLimit}}}}
	}
	pods := []*v1.Pod{
		mk("emptydir-over", withScratch),
		mk("emptydir-within", withScratch),
		mk("pod-over", func(p *v1.Pod) { limit(&p.Spec.Containers[0], "20Mi") }),
		mk("container-over", func(p *v1.Pod) { limit(&p.Spec.Containers[0], "5Mi"); limit(&p.Spec.Containers[1], "100Mi") }),
		mk("unlimited", nil),
		mk("no-stats", func(p *v1.Pod) { limit(&p.Spec.Containers[0], "1") }),
	}
	s := &statsapi.Summary{Pods: []statsapi.PodStats{
		stats("emptydir-over", 12*mi, 0, 0, 11*mi),
		stats("emptydir-within", 12*mi, 0, 0, 9*mi),
		stats("pod-over", 30*mi, 1*mi, 0, 29*mi),
		stats("container-over", 7*mi, 4*mi, 2*mi, 1*mi),
		stats("unlimited", 900*mi, 500*mi, 100*mi, 300*mi),
	}}
	got := localStorageViolations(pods, statsByPod(s))
	want := []string{
		`emptydir-over: Usage of EmptyDir volume "scratch" exceeds the limit "10Mi".`,
		`pod-over: Pod ephemeral local storage usage exceeds the total limit of containers 20Mi.`,
		`container-over: Container c exceeded its local ephemeral storage limit "5Mi".`,
	}
	var lines []string
	for _, v := range got {
		lines = append(lines, v.pod.Name+": "+v.message)
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// A pod over its ephemeral-storage limit is evicted alone, at once, with no threshold met; a critical pod
// over its limit is not evicted.
func TestSynchronizeEvictsAPodOverItsStorageLimit(t *testing.T) {
	f := newManager(t, map[string]string{"memory.available": "100Mi"}, nil, nil)
	writer := pod("writer", 0, 0)
	writer.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Mi")}
	critical := pod("critical", 0, 0)
	critical.Spec.Containers[0].Resources.Limits = writer.Spec.Containers[0].Resources.Limits
	critical.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	f.pods = []*v1.Pod{critical, pod("bystander", 0, 0), writer}
	f.sum = summaryOf(f.clock.Now(), 500, 50, map[string]uint64{"critical": 10, "bystander": 10, "writer": 10})
	for i := range f.sum.Pods {
		f.sum.Pods[i].EphemeralStorage = &statsapi.FsStats{UsedBytes: u64(50 * mi)}
	}
	got := f.m.Synchronize(context.Background())
	if got == nil || got.Name != "writer" || len(f.evicter.got) != 1 || f.evicter.got[0].grace != immediateGrace {
		t.Fatalf("evicted %v (%+v), want writer alone with 1 s", got, f.evicter.got)
	}
	if mem, disk, _ := f.m.Pressure(); mem || disk {
		t.Error("a pod over its own limit is not node pressure")
	}
}
