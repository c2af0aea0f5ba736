package cgroups

import (
	"path/filepath"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

func TestNodeAllocatable(t *testing.T) {
	tests := []struct {
		name                       string
		capacity, kube, sys, evict string
		want                       string
	}{
		{
			name:     "nothing reserved",
			capacity: "cpu=2,memory=24Gi,pid=4194304",
			want:     "cpu=2,memory=24Gi,pid=4194304",
		},
		{
			name:     "upstream default hard eviction only",
			capacity: "cpu=2,memory=24Gi",
			evict:    "memory=100Mi",
			want:     "cpu=2,memory=24476Mi",
		},
		{
			name:     "kube and system reserved plus eviction",
			capacity: "cpu=4,memory=8Gi,pid=1000",
			kube:     "cpu=100m,memory=256Mi,pid=100",
			sys:      "cpu=200m,memory=512Mi",
			evict:    "memory=100Mi",
			want:     "cpu=3700m,memory=7324Mi,pid=900",
		},
		{
			name:     "never below zero",
			capacity: "cpu=1,memory=1Gi",
			kube:     "cpu=2",
			want:     "cpu=0,memory=1Gi",
		},
		{
			name:     "reservations of absent resources are ignored",
			capacity: "cpu=1",
			kube:     "memory=1Gi,ephemeral-storage=1Gi",
			want:     "cpu=1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NodeAllocatable(rl(tt.capacity), rl(tt.kube), rl(tt.sys), rl(tt.evict))
			assertList(t, "allocatable", got, rl(tt.want))
		})
	}
}

func TestPodsCgroupConfig(t *testing.T) {
	got := podsCgroupConfig(rl("cpu=3700m,memory=7324Mi,pid=900"))
	want := ResourceConfig{CPUShares: ptr(uint64(3788)), Memory: ptr(int64(7324 << 20)), PidsLimit: ptr(int64(900))}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("podsCgroupConfig = %s, want %s", fmtRC(got), fmtRC(&want))
	}
	if got := podsCgroupConfig(rl("memory=1Gi")); got.CPUShares != nil || got.PidsLimit != nil {
		t.Errorf("podsCgroupConfig without cpu/pid = %s, want memory only", fmtRC(got))
	}
}

func TestQOSCgroupConfigs(t *testing.T) {
	tests := []struct {
		milli           int64
		wantBurstable   uint64
		wantBestEffort  uint64
		hugePageSizes   []int64
		wantHugeEntries int
	}{
		{0, 2, 2, nil, 0},
		{250, 256, 2, []int64{2 << 20}, 1},
		{1750, 1792, 2, []int64{2 << 20, 1 << 30}, 2},
		{1 << 40, podfacts.MaxShares, 2, nil, 0},
	}
	for _, tt := range tests {
		b, be := qosCgroupConfigs(tt.milli, tt.hugePageSizes)
		if *b.CPUShares != tt.wantBurstable || *be.CPUShares != tt.wantBestEffort {
			t.Errorf("qosCgroupConfigs(%d) shares = %d, %d; want %d, %d", tt.milli, *b.CPUShares, *be.CPUShares,
				tt.wantBurstable, tt.wantBestEffort)
		}
		if len(b.HugePageLimit) != tt.wantHugeEntries || len(be.HugePageLimit) != tt.wantHugeEntries {
			t.Errorf("qosCgroupConfigs huge pages = %v, %v; want %d unbounded entries", b.HugePageLimit, be.HugePageLimit, tt.wantHugeEntries)
		}
		for _, v := range b.HugePageLimit {
			if v != hugePagesUnbounded {
				t.Errorf("huge page limit %d, want unbounded", v)
			}
		}
	}
}

func TestMachineCapacity(t *testing.T) {
	proc := t.TempDir()
	mustWrite(t, filepath.Join(proc, "meminfo"), "MemTotal:       24578912 kB\nMemFree:        1000 kB\n")
	mustMkdir(t, filepath.Join(proc, "sys", "kernel"))
	mustWrite(t, filepath.Join(proc, "sys", "kernel", "pid_max"), "4194304\n")
	got, err := MachineCapacity(proc)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Memory().Value(); m != 24578912*1024 {
		t.Errorf("memory = %d", m)
	}
	if p := got[ResourcePID]; p.Value() != 4194304 {
		t.Errorf("pid = %s", p.String())
	}
	if got.Cpu().Value() < 1 {
		t.Errorf("cpu = %s", got.Cpu().String())
	}
	if _, err := MachineCapacity(t.TempDir()); err == nil {
		t.Error("MachineCapacity without meminfo: want error")
	}
	_ = v1.ResourceCPU
}
