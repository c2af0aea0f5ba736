package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

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
