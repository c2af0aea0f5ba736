package cgroups

import (
	"testing"
)

func TestHugePageSizeName(t *testing.T) {
	tests := []struct {
		size    int64
		want    string
		wantErr bool
	}{
		{4096, "4KB", false},
		{2 << 20, "2MB", false},
		{1 << 30, "1GB", false},
		{64 << 10, "64KB", false},
		{1 << 50, "1PB", false},
		{0, "", true},
		{1025 << 10, "", true},
	}
	for _, tt := range tests {
		got, err := HugePageSizeName(tt.size)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("HugePageSizeName(%d) = %q, %v; want %q, err %v", tt.size, got, err, tt.want, tt.wantErr)
		}
		if err == nil {
			back, err := parseHugePageSizeName(got)
			if err != nil || back != tt.size {
				t.Errorf("parseHugePageSizeName(%q) = %d, %v; want %d", got, back, err, tt.size)
			}
		}
	}
	for _, bad := range []string{"", "MB", "2XB", "-2MB", "2", "0MB"} {
		if _, err := parseHugePageSizeName(bad); err == nil {
			t.Errorf("parseHugePageSizeName(%q): want error", bad)
		}
	}
}

func TestHugePageLimits(t *testing.T) {
	got := HugePageLimits(rl("cpu=1,hugepages-2Mi=4Mi,hugepages-1Gi=2Gi,memory=1Gi"))
	want := map[int64]int64{2 << 20: 4 << 20, 1 << 30: 2 << 30}
	if len(got) != len(want) {
		t.Fatalf("HugePageLimits = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("HugePageLimits[%d] = %d, want %d", k, got[k], v)
		}
	}
}
