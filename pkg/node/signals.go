package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Signals are the node-level eviction signals. A negative value is unknown and never crosses a threshold.
type Signals struct {
	MemoryAvailableBytes int64
	NodeFSAvailableBytes int64
	NodeFSCapacityBytes  int64
	NodeFSInodesFree     int64
	NodeFSInodes         int64
	PIDsAvailable        int64
	PIDsMax              int64
}

// readSignals reads the signals of this machine: memory.available is MemAvailable of /proc/meminfo, nodefs
// is the filesystem of rootDir, pid.available is the PID limit (the lower of pid_max and threads-max) less
// the running tasks.
func readSignals(root, rootDir string) (Signals, error) {
	s := Signals{MemoryAvailableBytes: -1, NodeFSAvailableBytes: -1, NodeFSInodesFree: -1, PIDsAvailable: -1}
	mem, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return s, fmt.Errorf("read meminfo: %w", err)
	}
	if v, ok := meminfoField(mem, "MemAvailable"); ok {
		s.MemoryAvailableBytes = v
	}
	var st unix.Statfs_t
	if err := unix.Statfs(rootDir, &st); err != nil {
		return s, fmt.Errorf("statfs %s: %w", rootDir, err)
	}
	s.NodeFSAvailableBytes = int64(st.Bavail) * st.Bsize
	s.NodeFSCapacityBytes = int64(st.Blocks) * st.Bsize
	s.NodeFSInodesFree, s.NodeFSInodes = int64(st.Ffree), int64(st.Files)
	if s.NodeFSInodes == 0 { // filesystems without inode accounting
		s.NodeFSInodesFree = -1
	}
	var maxPIDs int64
	for _, f := range []string{"proc/sys/kernel/pid_max", "proc/sys/kernel/threads-max"} {
		if v, err := strconv.ParseInt(firstLine(filepath.Join(root, f)), 10, 64); err == nil && v > 0 &&
			(maxPIDs == 0 || v < maxPIDs) {
			maxPIDs = v
		}
	}
	var si unix.Sysinfo_t
	if maxPIDs > 0 && unix.Sysinfo(&si) == nil {
		s.PIDsMax, s.PIDsAvailable = maxPIDs, maxPIDs-int64(si.Procs)
	}
	return s, nil
}

// pressure says which thresholds the signals cross now.
type pressure struct{ memory, disk, pid bool }

// underPressure compares the signals with the thresholds.
func underPressure(s Signals, t Thresholds) pressure {
	var p pressure
	p.memory = t.MemoryAvailableBytes > 0 && s.MemoryAvailableBytes >= 0 && s.MemoryAvailableBytes < t.MemoryAvailableBytes
	p.disk = t.NodeFSAvailable > 0 && s.NodeFSAvailableBytes >= 0 && s.NodeFSCapacityBytes > 0 &&
		float64(s.NodeFSAvailableBytes) < t.NodeFSAvailable*float64(s.NodeFSCapacityBytes) ||
		t.NodeFSInodesFree > 0 && s.NodeFSInodesFree >= 0 && s.NodeFSInodes > 0 &&
			float64(s.NodeFSInodesFree) < t.NodeFSInodesFree*float64(s.NodeFSInodes)
	p.pid = t.PIDAvailable > 0 && s.PIDsAvailable >= 0 && s.PIDsMax > 0 &&
		float64(s.PIDsAvailable) < t.PIDAvailable*float64(s.PIDsMax)
	return p
}

// pressureTracker remembers when each pressure was last observed, so that a condition stays True for the
// transition period after its signal recovered, as upstream's eviction manager does.
type pressureTracker struct {
	lastMemory, lastDisk, lastPID time.Time
}

// observe records what is crossed now and returns the pressures to report.
func (t *pressureTracker) observe(p pressure, now time.Time, period time.Duration) pressure {
	if p.memory {
		t.lastMemory = now
	}
	if p.disk {
		t.lastDisk = now
	}
	if p.pid {
		t.lastPID = now
	}
	held := func(last time.Time) bool { return !last.IsZero() && now.Sub(last) < period }
	return pressure{memory: p.memory || held(t.lastMemory), disk: p.disk || held(t.lastDisk), pid: p.pid || held(t.lastPID)}
}

// pressureConditions are the three pressure conditions as upstream words them, with their events.
var pressureConditions = []struct {
	typ                   v1.NodeConditionType
	on                    func(pressure) bool
	reasonOn, reasonOff   string
	messageOn, messageOff string
	eventOn, eventOff     string
}{
	{v1.NodeMemoryPressure, func(p pressure) bool { return p.memory },
		"KubeletHasInsufficientMemory", "KubeletHasSufficientMemory",
		"kubelet has insufficient memory available", "kubelet has sufficient memory available",
		"NodeHasInsufficientMemory", "NodeHasSufficientMemory"},
	{v1.NodeDiskPressure, func(p pressure) bool { return p.disk },
		"KubeletHasDiskPressure", "KubeletHasNoDiskPressure",
		"kubelet has disk pressure", "kubelet has no disk pressure",
		"NodeHasDiskPressure", "NodeHasNoDiskPressure"},
	{v1.NodePIDPressure, func(p pressure) bool { return p.pid },
		"KubeletHasInsufficientPID", "KubeletHasSufficientPID",
		"kubelet has insufficient PID available", "kubelet has sufficient PID available",
		"NodeHasInsufficientPID", "NodeHasSufficientPID"},
}

// setPressureConditions writes the three pressure conditions into conds (keeping each one's transition time
// while its status holds) and returns the event reasons of the transitions (e.g. "NodeHasDiskPressure").
func setPressureConditions(conds []v1.NodeCondition, p pressure, now metav1.Time) ([]v1.NodeCondition, []string) {
	var events []string
	for _, pc := range pressureConditions {
		c := v1.NodeCondition{Type: pc.typ, Status: v1.ConditionFalse, Reason: pc.reasonOff, Message: pc.messageOff,
			LastHeartbeatTime: now}
		event := pc.eventOff
		if pc.on(p) {
			c.Status, c.Reason, c.Message, event = v1.ConditionTrue, pc.reasonOn, pc.messageOn, pc.eventOn
		}
		var changed bool
		if conds, changed = setCondition(conds, c, now); changed {
			events = append(events, event)
		}
	}
	return conds, events
}
