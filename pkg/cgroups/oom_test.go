package cgroups

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Cases follow upstream's pkg/kubelet/qos/policy_test.go (capacity 4000
// bytes there; 10 GiB here keeps the arithmetic readable).
func TestContainerOOMScoreAdj(t *testing.T) {
	const capacity = int64(10 << 30)
	critical := guaranteedPod("c")
	critical.Spec.PriorityClassName = systemNodeCritical
	critical.Spec.Priority = ptr(int32(2000001000))
	criticalBurstable := burstablePod("cb")
	criticalBurstable.Spec.PriorityClassName = systemNodeCritical
	criticalBurstable.Annotations = map[string]string{configSourceAnnotation: "file"}

	tests := []struct {
		name      string
		pod       *v1.Pod
		container int // index in Containers; -1 for InitContainers[0]
		capacity  int64
		want      int
	}{
		{"guaranteed", guaranteedPod("a"), 0, capacity, -997},
		{"besteffort", bestEffortPod("a"), 0, capacity, 1000},
		{"node critical", critical, 0, capacity, -997},
		{"node critical static burstable", criticalBurstable, 0, capacity, -997},
		{"burstable 10%", mkPod("a", []v1.Container{ctr("a", "memory=1Gi", "")}), 0, capacity, 900},
		{"burstable 50%", mkPod("a", []v1.Container{ctr("a", "memory=5Gi", "")}), 0, capacity, 500},
		{"burstable 99.9%+ clamps to 3", mkPod("a", []v1.Container{ctr("a", "memory=10Gi", "")}), 0, capacity, 3},
		{"burstable above capacity clamps to 3", mkPod("a", []v1.Container{ctr("a", "memory=20Gi", "")}), 0, capacity, 3},
		{"burstable without memory request is 999", mkPod("a", []v1.Container{ctr("a", "cpu=1", "")}), 0, capacity, 999},
		{"burstable tiny request is 999", mkPod("a", []v1.Container{ctr("a", "memory=1Ki", "")}), 0, capacity, 999},
		{"zero capacity is 999", mkPod("a", []v1.Container{ctr("a", "memory=1Gi", "")}), 0, 0, 999},
		{
			"sidecar scores no higher than the smallest regular container",
			mkPod("a", []v1.Container{ctr("a", "memory=2Gi", ""), ctr("b", "memory=4Gi", "")},
				withInit(sidecar("s", "memory=1Gi", ""))),
			-1, capacity, 800,
		},
		{
			"pod-level request shared among containers",
			mkPod("a", []v1.Container{ctr("a", "memory=1Gi", ""), ctr("b", "memory=1Gi", "")},
				withPodResources("memory=4Gi", "")),
			0, capacity, 800,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &tt.pod.Spec.Containers[0]
			if tt.container >= 0 {
				c = &tt.pod.Spec.Containers[tt.container]
			} else {
				c = &tt.pod.Spec.InitContainers[0]
			}
			if got := ContainerOOMScoreAdj(tt.pod, c, tt.capacity); got != tt.want {
				t.Errorf("ContainerOOMScoreAdj = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestClampOOMScoreAdj(t *testing.T) {
	tests := []struct{ adj, floor, want int }{
		{-997, 0, 0},        // host refuses negative values
		{-997, -1000, -997}, // host allows them
		{500, 0, 500},
		{1000, 0, 1000},
		{-2000, -2000, -1000},
		{2000, 0, 1000},
		{-997, 200, 200},
	}
	for _, tt := range tests {
		if got := ClampOOMScoreAdj(tt.adj, tt.floor); got != tt.want {
			t.Errorf("ClampOOMScoreAdj(%d, %d) = %d, want %d", tt.adj, tt.floor, got, tt.want)
		}
	}
}

func TestOOMScoreAdjFloor(t *testing.T) {
	tests := []struct {
		name, capEff, adj string
		want              int
		wantErr           bool
	}{
		// This machine: every capability but CAP_SYS_RESOURCE.
		{"no CAP_SYS_RESOURCE", "000001fffeffffff", "0", 0, false},
		{"no CAP_SYS_RESOURCE, raised", "000001fffeffffff", "-500", -500, false},
		{"CAP_SYS_RESOURCE", "000001ffffffffff", "0", -1000, false},
		{"bad status", "zz", "0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc := t.TempDir()
			dir := filepath.Join(proc, "42")
			mustMkdir(t, dir)
			mustWrite(t, filepath.Join(dir, "status"), "Name:\tcontainerd\nCapInh:\t0000000000000000\nCapEff:\t"+tt.capEff+"\n")
			mustWrite(t, filepath.Join(dir, "oom_score_adj"), tt.adj+"\n")
			got, err := OOMScoreAdjFloor(proc, 42)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("OOMScoreAdjFloor = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestContainerOOMGroup(t *testing.T) {
	if !ContainerOOMGroup(ModeV2, false) || ContainerOOMGroup(ModeV2, true) ||
		ContainerOOMGroup(ModeV1, false) || ContainerOOMGroup(ModeHybrid, false) {
		t.Error("memory.oom.group is for v2 without single-process OOM kill only")
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
