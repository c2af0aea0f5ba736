package node

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUnderPressure(t *testing.T) {
	ok := Signals{MemoryAvailableBytes: 1 << 30, NodeFSAvailableBytes: 50, NodeFSCapacityBytes: 100,
		NodeFSInodesFree: 50, NodeFSInodes: 100, PIDsAvailable: 900, PIDsMax: 1000}
	with := func(f func(*Signals)) Signals { s := ok; f(&s); return s }
	def := DefaultThresholds
	pid := DefaultThresholds
	pid.PIDAvailable = 0.1
	tests := []struct {
		name string
		s    Signals
		t    Thresholds
		want pressure
	}{
		{"none", ok, def, pressure{}},
		{"memory below 100Mi", with(func(s *Signals) { s.MemoryAvailableBytes = 99 << 20 }), def, pressure{memory: true}},
		{"memory at 100Mi", with(func(s *Signals) { s.MemoryAvailableBytes = 100 << 20 }), def, pressure{}},
		{"memory unknown", with(func(s *Signals) { s.MemoryAvailableBytes = -1 }), def, pressure{}},
		{"nodefs below 10%", with(func(s *Signals) { s.NodeFSAvailableBytes = 9 }), def, pressure{disk: true}},
		{"inodes below 5%", with(func(s *Signals) { s.NodeFSInodesFree = 4 }), def, pressure{disk: true}},
		{"inodes unknown", with(func(s *Signals) { s.NodeFSInodesFree = -1 }), def, pressure{}},
		{"pids: no threshold upstream", with(func(s *Signals) { s.PIDsAvailable = 1 }), def, pressure{}},
		{"pids below 10%", with(func(s *Signals) { s.PIDsAvailable = 99 }), pid, pressure{pid: true}},
		{"memory threshold off", with(func(s *Signals) { s.MemoryAvailableBytes = 1 }),
			Thresholds{MemoryAvailableBytes: -1}, pressure{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := underPressure(tt.s, tt.t); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPressureTrackerHoldsForTransitionPeriod(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	period := 5 * time.Minute
	var tr pressureTracker
	steps := []struct {
		at   time.Duration
		now  pressure
		want pressure
	}{
		{0, pressure{}, pressure{}},
		{10 * time.Second, pressure{memory: true}, pressure{memory: true}},
		{20 * time.Second, pressure{}, pressure{memory: true}},
		{5*time.Minute + 9*time.Second, pressure{disk: true}, pressure{memory: true, disk: true}},
		{5*time.Minute + 10*time.Second, pressure{}, pressure{disk: true}},
		{10*time.Minute + 9*time.Second, pressure{}, pressure{}},
	}
	for _, s := range steps {
		if got := tr.observe(s.now, t0.Add(s.at), period); got != s.want {
			t.Errorf("at %v: got %+v, want %+v", s.at, got, s.want)
		}
	}
}

func TestSetPressureConditions(t *testing.T) {
	now := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	conds, events := setPressureConditions(nil, pressure{}, now)
	if len(conds) != 3 || !reflect.DeepEqual(events, []string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"}) {
		t.Fatalf("conds = %v, events = %v", conds, events)
	}
	for _, c := range conds {
		if c.Status != v1.ConditionFalse {
			t.Errorf("%s = %s", c.Type, c.Status)
		}
	}
	conds, events = setPressureConditions(conds, pressure{disk: true}, now)
	if !reflect.DeepEqual(events, []string{"NodeHasDiskPressure"}) {
		t.Errorf("events = %v", events)
	}
	if c := conds[1]; c.Type != v1.NodeDiskPressure || c.Status != v1.ConditionTrue || c.Reason != "KubeletHasDiskPressure" ||
		c.Message != "kubelet has disk pressure" {
		t.Errorf("disk = %+v", c)
	}
	if _, events = setPressureConditions(conds, pressure{disk: true}, now); len(events) != 0 {
		t.Errorf("no change: events = %v", events)
	}
}

func TestReadSignals(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"proc/meminfo":                testMeminfo,
		"proc/sys/kernel/pid_max":     "4194304\n",
		"proc/sys/kernel/threads-max": "200000\n",
	})
	s, err := readSignals(root, root)
	if err != nil {
		t.Fatal(err)
	}
	if s.MemoryAvailableBytes != 20000000*1024 || s.NodeFSCapacityBytes <= 0 || s.NodeFSAvailableBytes < 0 ||
		s.PIDsMax != 200000 || s.PIDsAvailable <= 0 || s.PIDsAvailable >= 200000 {
		t.Errorf("signals = %+v", s)
	}
}
