package podsync

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/metrics"
)

func histogram(t *testing.T, h interface{ Write(*dto.Metric) error }) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func TestStartTracker(t *testing.T) {
	created := time.Unix(1000, 0)
	running := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	pending := v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}}}}
	tr := newStartTracker()

	n0, _ := histogram(t, metrics.PodStartDuration)
	s0, sliSum0 := histogram(t, metrics.PodStartSLIDuration)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a", CreationTimestamp: metav1.NewTime(created)}}
	tr.synced(pod, &pending, created.Add(time.Second))
	tr.pulled("a", 3*time.Second)
	tr.synced(pod, &running, created.Add(6*time.Second))
	tr.synced(pod, &running, created.Add(7*time.Second)) // once only
	n1, _ := histogram(t, metrics.PodStartDuration)
	s1, sliSum1 := histogram(t, metrics.PodStartSLIDuration)
	if n1-n0 != 1 || s1-s0 != 1 {
		t.Fatalf("starts observed %d, SLI %d; want one each", n1-n0, s1-s0)
	}
	if got := sliSum1 - sliSum0; got != 3 {
		t.Errorf("SLI %v s, want 6 s since creation less 3 s of pulling", got)
	}

	// A pod that already ran when first seen (a restarted kubelet adopts it) is not a start.
	adopted := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "b", CreationTimestamp: metav1.NewTime(created)}, Status: running}
	tr.synced(adopted, &running, created.Add(time.Hour))
	if n2, _ := histogram(t, metrics.PodStartDuration); n2 != n1 {
		t.Error("an adopted pod counted as a start")
	}
	tr.forget("a")
	tr.forget("b")
	if len(tr.pods) != 0 {
		t.Errorf("%d pods left after forget", len(tr.pods))
	}
}
