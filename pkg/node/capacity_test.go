package node

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCapacityAndAllocatable(t *testing.T) {
	gi := int64(1 << 30)
	host := &Host{NumCPU: 4, MemoryBytes: 8 * gi, EphemeralStorageBytes: 100 * gi,
		HugePages: map[int64]int64{2 << 20: 512 << 20}}
	q := resource.MustParse
	tests := []struct {
		name     string
		reserved v1.ResourceList
		t        Thresholds
		want     map[v1.ResourceName]string
	}{
		{
			name: "upstream thresholds",
			t:    DefaultThresholds,
			want: map[v1.ResourceName]string{"cpu": "4", "memory": "7580Mi", "pods": "110",
				"ephemeral-storage": "92160Mi", "hugepages-2Mi": "512Mi"},
		},
		{
			name:     "reserved",
			reserved: v1.ResourceList{"cpu": q("500m"), "memory": q("1Gi"), "ephemeral-storage": q("10Gi")},
			t:        DefaultThresholds,
			want: map[v1.ResourceName]string{"cpu": "3500m", "memory": "6556Mi", "pods": "110",
				"ephemeral-storage": "81920Mi", "hugepages-2Mi": "512Mi"},
		},
		{
			name: "thresholds off",
			t:    Thresholds{MemoryAvailableBytes: -1, NodeFSAvailable: -1},
			want: map[v1.ResourceName]string{"cpu": "4", "memory": "7680Mi", "pods": "110",
				"ephemeral-storage": "100Gi", "hugepages-2Mi": "512Mi"},
		},
		{
			name: "percentage and quantity thresholds",
			t:    Thresholds{MemoryAvailableFraction: 0.25, NodeFSAvailableBytes: 10 * gi},
			want: map[v1.ResourceName]string{"cpu": "4", "memory": "5632Mi", "pods": "110",
				"ephemeral-storage": "90Gi", "hugepages-2Mi": "512Mi"},
		},
		{
			name:     "never below zero",
			reserved: v1.ResourceList{"cpu": q("8"), "memory": q("100Gi")},
			t:        DefaultThresholds,
			want: map[v1.ResourceName]string{"cpu": "0", "memory": "0", "pods": "110",
				"ephemeral-storage": "92160Mi", "hugepages-2Mi": "512Mi"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := capacity(host, 110)
			if got := c[v1.ResourceMemory]; got.Cmp(q("8Gi")) != 0 {
				t.Errorf("capacity memory = %s", got.String())
			}
			alloc := allocatable(c, tt.reserved, tt.t)
			if len(alloc) != len(tt.want) {
				t.Errorf("allocatable = %v", alloc)
			}
			for name, want := range tt.want {
				got := alloc[name]
				if got.Cmp(q(want)) != 0 {
					t.Errorf("%s = %s, want %s", name, got.String(), want)
				}
			}
		})
	}
}

func TestThresholdDefaults(t *testing.T) {
	got := Thresholds{NodeFSAvailable: -1}.withDefaults()
	if got.MemoryAvailableBytes != 100<<20 || got.NodeFSAvailable != -1 {
		t.Errorf("withDefaults = %+v", got)
	}
}

func TestHugePageResource(t *testing.T) {
	if got := hugePageResource(2 << 20); got != "hugepages-2Mi" {
		t.Errorf("got %s", got)
	}
	if got := hugePageResource(1 << 30); got != "hugepages-1Gi" {
		t.Errorf("got %s", got)
	}
}
