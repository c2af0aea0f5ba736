package cgroups

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestCgroupNames(t *testing.T) {
	const uid = "5f0c2a9e-1b2c-4d3e-8f90-0123456789ab"
	root := cgroupName{"kubepods"}
	tests := []struct {
		name                    string
		n                       cgroupName
		cgroupfs, systemd, unit string
	}{
		{"root", cgroupName{}, "/", "/", "-.slice"},
		{"pods", root, "/kubepods", "/kubepods.slice", "kubepods.slice"},
		{"burstable", qosName(root, v1.PodQOSBurstable), "/kubepods/burstable",
			"/kubepods.slice/kubepods-burstable.slice", "kubepods-burstable.slice"},
		{"guaranteed pod", podName(root, v1.PodQOSGuaranteed, uid), "/kubepods/pod" + uid,
			"/kubepods.slice/kubepods-pod5f0c2a9e_1b2c_4d3e_8f90_0123456789ab.slice",
			"kubepods-pod5f0c2a9e_1b2c_4d3e_8f90_0123456789ab.slice"},
		{"besteffort pod", podName(root, v1.PodQOSBestEffort, "abc"), "/kubepods/besteffort/podabc",
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podabc.slice",
			"kubepods-besteffort-podabc.slice"},
		{"dashed root", podName(cgroupName{"kubepods-test-x1"}, v1.PodQOSBurstable, "a-b"),
			"/kubepods-test-x1/burstable/poda-b",
			"/kubepods_test_x1.slice/kubepods_test_x1-burstable.slice/kubepods_test_x1-burstable-poda_b.slice",
			"kubepods_test_x1-burstable-poda_b.slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.n.cgroupfs(); got != tt.cgroupfs {
				t.Errorf("cgroupfs = %q, want %q", got, tt.cgroupfs)
			}
			if got := tt.n.systemd(); got != tt.systemd {
				t.Errorf("systemd = %q, want %q", got, tt.systemd)
			}
			if got := tt.n.systemdUnit(); got != tt.unit {
				t.Errorf("systemdUnit = %q, want %q", got, tt.unit)
			}
		})
	}
}

func TestParseCgroupfsName(t *testing.T) {
	tests := []struct {
		in      string
		want    cgroupName
		wantErr bool
	}{
		{"/kubepods", cgroupName{"kubepods"}, false},
		{"/a/b", cgroupName{"a", "b"}, false},
		{"/", nil, false},
		{"kubepods", nil, true},
		{"/a/../b", nil, true},
		{"/a/", nil, true},
		{"", nil, true},
	}
	for _, tt := range tests {
		got, err := parseCgroupfsName(tt.in)
		if (err != nil) != tt.wantErr || len(got) != len(tt.want) {
			t.Errorf("parseCgroupfsName(%q) = %v, %v", tt.in, got, err)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("parseCgroupfsName(%q) = %v, want %v", tt.in, got, tt.want)
			}
		}
	}
}

func TestPodUIDFromDir(t *testing.T) {
	tests := []struct {
		driver Driver
		dir    string
		want   types.UID
		ok     bool
	}{
		{DriverCgroupfs, "pod5f0c2a9e-1b2c", "5f0c2a9e-1b2c", true},
		{DriverCgroupfs, "burstable", "", false},
		{DriverCgroupfs, "pod", "", false},
		{DriverCgroupfs, "cri-containerd-abc.scope", "", false},
		{DriverSystemd, "kubepods-burstable-pod5f0c2a9e_1b2c.slice", "5f0c2a9e-1b2c", true},
		{DriverSystemd, "kubepods-pod12.slice", "12", true},
		{DriverSystemd, "kubepods_test_x-besteffort-poda_b.slice", "a-b", true},
		{DriverSystemd, "kubepods-burstable.slice", "", false},
		{DriverSystemd, "pod12", "", false},
	}
	for _, tt := range tests {
		got, ok := podUIDFromDir(tt.driver, tt.dir)
		if got != tt.want || ok != tt.ok {
			t.Errorf("podUIDFromDir(%s, %q) = %q, %v; want %q, %v", tt.driver, tt.dir, got, ok, tt.want, tt.ok)
		}
	}
}
