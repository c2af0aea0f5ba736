package eviction

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// observation is what a signal measured: how much is available of how much, and when.
type observation struct {
	available, capacity int64
	at                  time.Time
}

// observations are the signals measured in one summary; a signal the summary lacks is absent.
type observations map[Signal]observation

// observe derives the signals from a stats summary, as upstream does: memory.available is the node's
// available memory (capacity less the root cgroup's working set), allocatableMemory.available the pods
// cgroup's, the filesystems' from statfs of the kubelet's root and the runtime's image filesystem,
// pid.available the PID limit less the running processes. A field the summary does not have (a read that
// failed) leaves its signal unobserved, never zero.
func observe(s *statsapi.Summary) observations {
	out := observations{}
	if s == nil {
		return out
	}
	mem := func(sig Signal, m *statsapi.MemoryStats) {
		if m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
			out[sig] = observation{available: int64(*m.AvailableBytes), capacity: int64(*m.AvailableBytes + *m.WorkingSetBytes), at: m.Time.Time}
		}
	}
	mem(SignalMemoryAvailable, s.Node.Memory)
	for _, c := range s.Node.SystemContainers {
		if c.Name == statsapi.SystemContainerPods {
			mem(SignalAllocatableMemoryAvailable, c.Memory)
		}
	}
	fs := func(bytes, inodes Signal, f *statsapi.FsStats) {
		if f == nil {
			return
		}
		if f.AvailableBytes != nil && f.CapacityBytes != nil {
			out[bytes] = observation{available: int64(*f.AvailableBytes), capacity: int64(*f.CapacityBytes), at: f.Time.Time}
		}
		if f.InodesFree != nil && f.Inodes != nil && *f.Inodes > 0 {
			out[inodes] = observation{available: int64(*f.InodesFree), capacity: int64(*f.Inodes), at: f.Time.Time}
		}
	}
	fs(SignalNodeFsAvailable, SignalNodeFsInodesFree, s.Node.Fs)
	if s.Node.Runtime != nil {
		fs(SignalImageFsAvailable, SignalImageFsInodesFree, s.Node.Runtime.ImageFs)
	}
	if r := s.Node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil && *r.MaxPID > 0 {
		out[SignalPIDAvailable] = observation{available: *r.MaxPID - *r.NumOfRunningProcesses, capacity: *r.MaxPID, at: r.Time.Time}
	}
	return out
}

// met returns the thresholds whose signal is below them now. With reclaim, a threshold counts as met until
// the signal is back above it by its minimum reclaim (eviction, once started, goes on that far).
func met(ts []Threshold, obs observations, reclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		limit := t.Value.of(o.capacity)
		if reclaim && t.MinReclaim != nil {
			limit += t.MinReclaim.of(o.capacity)
		}
		if o.available < limit {
			out = append(out, t)
		}
	}
	return out
}

// merge returns a with the thresholds of b it lacks.
func merge(a, b []Threshold) []Threshold {
	out := slices.Clone(a)
	for _, t := range b {
		if !slices.ContainsFunc(out, t.same) {
			out = append(out, t)
		}
	}
	return out
}

// firstSeen keeps, for each threshold met now, when it was first met (now if it was not met before).
func firstSeen(ts []Threshold, before map[Threshold]time.Time, now time.Time) map[Threshold]time.Time {
	out := map[Threshold]time.Time{}
	for _, t := range ts {
		if at, ok := before[t.key()]; ok {
			out[t.key()] = at
		} else {
			out[t.key()] = now
		}
	}
	return out
}

// pastGrace returns the thresholds met for at least their grace period, in the order of ts.
func pastGrace(ts []Threshold, since map[Threshold]time.Time, now time.Time) []Threshold {
	var out []Threshold
	for _, t := range ts {
		if at, ok := since[t.key()]; ok && now.Sub(at) >= t.GracePeriod {
			out = append(out, t)
		}
	}
	return out
}

// pressureConditions are the conditions the manager reports, in the order it reports them.
var pressureConditions = []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}

// conditions returns the node conditions the thresholds raise, each once, in a fixed order.
func conditions(ts []Threshold) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, c := range pressureConditions {
		for _, t := range ts {
			if signalFacts[t.Signal].condition == c {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// conditionsHeld updates when each condition was last raised and returns those raised within period, as
// upstream keeps a pressure condition True for the transition period after its signal recovered.
func conditionsHeld(raised []v1.NodeConditionType, last map[v1.NodeConditionType]time.Time, period time.Duration, now time.Time) []v1.NodeConditionType {
	for _, c := range raised {
		last[c] = now
	}
	var out []v1.NodeConditionType
	for _, c := range pressureConditions {
		if at, ok := last[c]; ok && now.Sub(at) < period {
			out = append(out, c)
		}
	}
	return out
}

// toReclaim picks the threshold to act on among those met past their grace period: memory first (as
// upstream orders them), then the others in their order.
func toReclaim(ts []Threshold) (Threshold, bool) {
	for _, t := range ts {
		if signalFacts[t.Signal].resource == v1.ResourceMemory {
			return t, true
		}
	}
	if len(ts) > 0 {
		return ts[0], true
	}
	return Threshold{}, false
}
