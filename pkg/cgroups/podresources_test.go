package cgroups

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

func assertList(t *testing.T, what string, got, want v1.ResourceList) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
		return
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g.Cmp(w) != 0 {
			t.Errorf("%s[%s] = %v, want %v", what, k, got[k], w.String())
		}
	}
}

func TestPodResourceConfig(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	i := func(v int64) *int64 { return &v }
	period := u(podfacts.QuotaPeriod)
	tests := []struct {
		name string
		pod  *v1.Pod
		opts PodOptions
		want ResourceConfig
	}{
		{
			name: "besteffort gets 2 shares and nothing else",
			pod:  bestEffortPod("a"),
			want: ResourceConfig{CPUShares: u(2), HugePageLimit: map[int64]int64{}},
		},
		{
			name: "guaranteed gets shares, quota and memory",
			pod:  guaranteedPod("a"),
			want: ResourceConfig{CPUShares: u(512), CPUQuota: i(50000), CPUPeriod: period, Memory: i(128 << 20), HugePageLimit: map[int64]int64{}},
		},
		{
			name: "burstable with all limits",
			pod:  burstablePod("a"),
			want: ResourceConfig{CPUShares: u(256), CPUQuota: i(100000), CPUPeriod: period, Memory: i(256 << 20), HugePageLimit: map[int64]int64{}},
		},
		{
			name: "burstable where one container lacks limits",
			pod: mkPod("a", []v1.Container{
				ctr("a", "cpu=100m,memory=100Mi", "cpu=200m,memory=200Mi"),
				ctr("b", "cpu=100m", ""),
			}),
			want: ResourceConfig{CPUShares: u(204), HugePageLimit: map[int64]int64{}},
		},
		{
			name: "burstable with cpu limits everywhere but not memory",
			pod: mkPod("a", []v1.Container{
				ctr("a", "cpu=100m", "cpu=200m,memory=200Mi"),
				ctr("b", "cpu=100m", "cpu=300m"),
			}),
			want: ResourceConfig{CPUShares: u(204), CPUQuota: i(50000), CPUPeriod: period, HugePageLimit: map[int64]int64{}},
		},
		{
			name: "init container without limit clears the quota",
			pod: mkPod("a", []v1.Container{ctr("a", "cpu=100m", "cpu=200m")},
				withInit(ctr("init", "cpu=50m", ""))),
			want: ResourceConfig{CPUShares: u(102), HugePageLimit: map[int64]int64{}},
		},
		{
			name: "fractional cpu",
			pod:  mkPod("a", []v1.Container{ctr("a", "cpu=0.0015", "cpu=0.0015")}),
			want: ResourceConfig{CPUShares: u(2), CPUQuota: i(1000), CPUPeriod: period, HugePageLimit: map[int64]int64{}},
		},
		{
			name: "quota disabled",
			pod:  guaranteedPod("a"),
			opts: PodOptions{DisableCPUQuota: true},
			want: ResourceConfig{CPUShares: u(512), CPUQuota: i(-1), CPUPeriod: period, Memory: i(128 << 20), HugePageLimit: map[int64]int64{}},
		},
		{
			name: "pids limit and huge pages",
			pod: mkPod("a", []v1.Container{
				ctr("a", "cpu=1,memory=1Gi,hugepages-2Mi=8Mi", "cpu=1,memory=1Gi,hugepages-2Mi=8Mi"),
			}),
			opts: PodOptions{PodPidsLimit: 1024},
			want: ResourceConfig{CPUShares: u(1024), CPUQuota: i(100000), CPUPeriod: period, Memory: i(1 << 30),
				PidsLimit: i(1024), HugePageLimit: map[int64]int64{2 << 20: 8 << 20}},
		},
		{
			name: "huge cpu request is clamped",
			pod:  mkPod("a", []v1.Container{ctr("a", "cpu=1000", "")}),
			want: ResourceConfig{CPUShares: u(podfacts.MaxShares), HugePageLimit: map[int64]int64{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodResourceConfig(tt.pod, tt.opts)
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("PodResourceConfig =\n %s\nwant\n %s", fmtRC(got), fmtRC(&tt.want))
			}
		})
	}
}

func fmtRC(rc *ResourceConfig) string {
	s := ""
	if rc.CPUShares != nil {
		s += " shares=" + itoa(int64(*rc.CPUShares))
	}
	if rc.CPUQuota != nil {
		s += " quota=" + itoa(*rc.CPUQuota)
	}
	if rc.CPUPeriod != nil {
		s += " period=" + itoa(int64(*rc.CPUPeriod))
	}
	if rc.Memory != nil {
		s += " memory=" + itoa(*rc.Memory)
	}
	if rc.PidsLimit != nil {
		s += " pids=" + itoa(*rc.PidsLimit)
	}
	for k, v := range rc.HugePageLimit {
		s += " huge[" + itoa(k) + "]=" + itoa(v)
	}
	return s
}
