package cgroups

import (
	"reflect"
	"testing"
)

// The files and formats each driver writes, as opencontainers/cgroups'
// fs and fs2 managers write them.
func TestResourceFiles(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	i := func(v int64) *int64 { return &v }
	huge := []int64{1 << 30, 2 << 20}
	tests := []struct {
		name    string
		rc      ResourceConfig
		unified bool
		want    []fileWrite
	}{
		{
			name: "v1 guaranteed pod",
			rc:   ResourceConfig{CPUShares: u(512), CPUQuota: i(50000), CPUPeriod: u(100000), Memory: i(128 << 20), PidsLimit: i(1024)},
			want: []fileWrite{{"cpu", "cpu.shares", "512"}, {"cpu", "cpu.cfs_period_us", "100000"},
				{"cpu", "cpu.cfs_quota_us", "50000"}, {"memory", "memory.limit_in_bytes", "134217728"}, {"pids", "pids.max", "1024"}},
		},
		{
			name:    "v2 guaranteed pod",
			rc:      ResourceConfig{CPUShares: u(512), CPUQuota: i(50000), CPUPeriod: u(100000), Memory: i(128 << 20), PidsLimit: i(1024)},
			unified: true,
			want: []fileWrite{{"", "cpu.weight", "20"}, {"", "cpu.max", "50000 100000"}, {"", "memory.max", "134217728"},
				{"", "pids.max", "1024"}},
		},
		{
			name: "v1 quota disabled",
			rc:   ResourceConfig{CPUShares: u(2), CPUQuota: i(-1), CPUPeriod: u(100000)},
			want: []fileWrite{{"cpu", "cpu.shares", "2"}, {"cpu", "cpu.cfs_period_us", "100000"}, {"cpu", "cpu.cfs_quota_us", "-1"}},
		},
		{
			name:    "v2 quota disabled",
			rc:      ResourceConfig{CPUShares: u(2), CPUQuota: i(-1), CPUPeriod: u(100000)},
			unified: true,
			want:    []fileWrite{{"", "cpu.weight", "1"}, {"", "cpu.max", "max 100000"}},
		},
		{
			name:    "pids limit zero is unlimited",
			rc:      ResourceConfig{PidsLimit: i(0)},
			unified: true,
			want:    []fileWrite{{"", "pids.max", "max"}},
		},
		{
			name: "v1 huge pages: every host size, unrequested ones 0",
			rc:   ResourceConfig{HugePageLimit: map[int64]int64{2 << 20: 8 << 20}},
			want: []fileWrite{{"hugetlb", "hugetlb.2MB.limit_in_bytes", "8388608"}, {"hugetlb", "hugetlb.1GB.limit_in_bytes", "0"}},
		},
		{
			name:    "v2 huge pages",
			rc:      ResourceConfig{HugePageLimit: map[int64]int64{}},
			unified: true,
			want:    []fileWrite{{"", "hugetlb.2MB.max", "0"}, {"", "hugetlb.1GB.max", "0"}},
		},
		{name: "nothing set", rc: ResourceConfig{}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resourceFiles(&tt.rc, tt.unified, huge)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("resourceFiles =\n %v\nwant\n %v", got, tt.want)
			}
		})
	}
}

func TestLibResources(t *testing.T) {
	shares := uint64(1024)
	rc := &ResourceConfig{CPUShares: &shares}
	v1r, err := libResources(rc, false, nil)
	if err != nil || v1r.CpuShares != 1024 || v1r.CpuWeight != 0 || !v1r.SkipDevices {
		t.Errorf("v1 resources = %+v, %v", v1r, err)
	}
	v2r, err := libResources(rc, true, nil)
	if err != nil || v2r.CpuShares != 0 || v2r.CpuWeight != 39 {
		t.Errorf("v2 resources = %+v, %v; want weight 39 (upstream's linear conversion)", v2r, err)
	}
}

func TestRemoveCgroupDir(t *testing.T) {
	dir := t.TempDir() + "/pod1"
	mustMkdir(t, dir+"/ctr1/sub")
	mustWrite(t, dir+"/cgroup.procs", "")
	mustWrite(t, dir+"/ctr1/cpu.shares", "2")
	if err := RemoveDir(dir); err != nil {
		t.Fatal(err)
	}
	if dirExists(dir) {
		t.Error("directory left behind")
	}
	if err := RemoveDir(dir); err != nil {
		t.Errorf("removing a removed cgroup = %v, want nil", err)
	}
}
