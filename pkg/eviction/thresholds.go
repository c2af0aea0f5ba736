package eviction

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal names what an eviction threshold watches, as upstream names it.
type Signal string

// The signals this kubelet observes.
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalNodeFsAvailable            Signal = "nodefs.available"
	SignalNodeFsInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFsAvailable           Signal = "imagefs.available"
	SignalImageFsInodesFree          Signal = "imagefs.inodesFree"
	SignalPIDAvailable               Signal = "pid.available"
)

// Resources the eviction manager reclaims beside v1's: inodes and process IDs.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// signalFacts are, for each signal, the resource it measures and the node condition it raises.
var signalFacts = map[Signal]struct {
	resource  v1.ResourceName
	condition v1.NodeConditionType
}{
	SignalMemoryAvailable:            {v1.ResourceMemory, v1.NodeMemoryPressure},
	SignalAllocatableMemoryAvailable: {v1.ResourceMemory, v1.NodeMemoryPressure},
	SignalNodeFsAvailable:            {v1.ResourceEphemeralStorage, v1.NodeDiskPressure},
	SignalNodeFsInodesFree:           {resourceInodes, v1.NodeDiskPressure},
	SignalImageFsAvailable:           {v1.ResourceEphemeralStorage, v1.NodeDiskPressure},
	SignalImageFsInodesFree:          {resourceInodes, v1.NodeDiskPressure},
	SignalPIDAvailable:               {resourcePIDs, v1.NodePIDPressure},
}

// DefaultHard are upstream's hard eviction thresholds on Linux, used when --eviction-hard is not given.
var DefaultHard = map[string]string{
	"memory.available":   "100Mi",
	"nodefs.available":   "10%",
	"nodefs.inodesFree":  "5%",
	"imagefs.available":  "15%",
	"imagefs.inodesFree": "5%",
}

// Defaults of the other settings, as upstream's.
const (
	DefaultTransitionPeriod = 5 * time.Minute
	DefaultMonitorInterval  = 10 * time.Second
)

// Value is a threshold's amount: a quantity (bytes, inodes or PIDs), or a fraction of the signal's capacity
// when Percentage is set (0 < Percentage <= 1).
type Value struct {
	Quantity   int64
	Percentage float64
}

// of returns the amount the value stands for on a signal of the given capacity.
func (v Value) of(capacity int64) int64 {
	if v.Percentage > 0 {
		return int64(float64(capacity) * v.Percentage)
	}
	return v.Quantity
}

func (v Value) String() string {
	if v.Percentage > 0 {
		return strconv.FormatFloat(v.Percentage*100, 'f', -1, 64) + "%"
	}
	return resource.NewQuantity(v.Quantity, resource.BinarySI).String()
}

// Threshold is one eviction threshold: the signal is met when what it observes available is below Value.
// A hard threshold has no grace period; a soft one is acted on once met for GracePeriod. MinReclaim, when
// set, is how far past the threshold eviction goes on once started.
type Threshold struct {
	Signal      Signal
	Value       Value
	GracePeriod time.Duration
	MinReclaim  *Value
}

// Hard reports whether the threshold acts at once (it has no grace period).
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

func (t Threshold) String() string { return string(t.Signal) + "<" + t.Value.String() }

// key is the threshold as a map key: its signal, value and grace period (the minimum reclaim, a pointer,
// left out).
func (t Threshold) key() Threshold {
	t.MinReclaim = nil
	return t
}

// same reports whether two thresholds are one (the same signal, value and grace period).
func (t Threshold) same(o Threshold) bool { return t.key() == o.key() }

// ParseStatements splits a flag value of comma-separated "<key><sep><value>" statements, as upstream's
// --eviction-hard ("memory.available<100Mi,nodefs.available<10%", sep "<") and --eviction-soft-grace-period
// ("memory.available=1m30s", sep "=") are written. Spaces around the parts are ignored; an empty value
// gives an empty map.
func ParseStatements(s, sep string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, sep)
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q is not <signal>%s<value>", part, sep)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s is given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// Parse turns the eviction settings into thresholds, as upstream parses them: hard thresholds, soft ones
// (each needs its grace period), and minimum reclaims. A 0% or 100% threshold is no threshold; an unknown
// signal, a malformed quantity, a percentage outside 0-100% or a quantity that is not positive is an error
// naming the signal. The result is ordered by signal, hard before soft.
func Parse(hard, soft, softGrace, minReclaim map[string]string) ([]Threshold, error) {
	hardT, err := parseThresholds(hard)
	if err != nil {
		return nil, fmt.Errorf("eviction-hard: %w", err)
	}
	softT, err := parseThresholds(soft)
	if err != nil {
		return nil, fmt.Errorf("eviction-soft: %w", err)
	}
	graces := map[Signal]time.Duration{}
	for _, k := range slices.Sorted(maps.Keys(softGrace)) {
		s, err := signal(k)
		if err != nil {
			return nil, fmt.Errorf("eviction-soft-grace-period: %w", err)
		}
		d, err := time.ParseDuration(softGrace[k])
		if err != nil || d < 0 {
			return nil, fmt.Errorf("eviction-soft-grace-period: %s: %q is not a positive duration", k, softGrace[k])
		}
		graces[s] = d
	}
	for i := range softT {
		d, ok := graces[softT[i].Signal]
		if !ok || d == 0 {
			return nil, fmt.Errorf("eviction-soft: %s: a grace period must be given for the soft threshold (--eviction-soft-grace-period)", softT[i].Signal)
		}
		softT[i].GracePeriod = d
	}
	reclaims := map[Signal]Value{}
	for _, k := range slices.Sorted(maps.Keys(minReclaim)) {
		s, err := signal(k)
		if err != nil {
			return nil, fmt.Errorf("eviction-minimum-reclaim: %w", err)
		}
		v, err := parseValue(s, minReclaim[k], true)
		if err != nil {
			return nil, fmt.Errorf("eviction-minimum-reclaim: %w", err)
		}
		if v != nil {
			reclaims[s] = *v
		}
	}
	all := append(hardT, softT...)
	for i := range all {
		if r, ok := reclaims[all[i].Signal]; ok {
			all[i].MinReclaim = &r
		}
	}
	return all, nil
}

func signal(k string) (Signal, error) {
	s := Signal(k)
	if _, ok := signalFacts[s]; !ok {
		known := make([]string, 0, len(signalFacts))
		for s := range signalFacts {
			known = append(known, string(s))
		}
		slices.Sort(known)
		return "", fmt.Errorf("unknown eviction signal %q (known: %s)", k, strings.Join(known, ", "))
	}
	return s, nil
}

func parseThresholds(statements map[string]string) ([]Threshold, error) {
	var out []Threshold
	for _, k := range slices.Sorted(maps.Keys(statements)) {
		s, err := signal(k)
		if err != nil {
			return nil, err
		}
		v, err := parseValue(s, statements[k], false)
		if err != nil {
			return nil, err
		}
		if v != nil {
			out = append(out, Threshold{Signal: s, Value: *v})
		}
	}
	return out, nil
}

// parseValue reads "100Mi", "1000" or "10%". For a threshold, 0% and 100% mean none (nil, as upstream).
func parseValue(s Signal, val string, reclaim bool) (*Value, error) {
	if p, ok := strings.CutSuffix(val, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: %q is not a percentage", s, val)
		case f < 0 || f > 100:
			return nil, fmt.Errorf("%s: %q: a percentage must be between 0%% and 100%%", s, val)
		case !reclaim && (f == 0 || f == 100):
			return nil, nil
		case reclaim && f == 0:
			return nil, nil
		}
		return &Value{Percentage: f / 100}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a quantity: %w", s, val, err)
	}
	if q.Sign() < 0 || (!reclaim && q.IsZero()) {
		return nil, fmt.Errorf("%s: %q must be positive", s, val)
	}
	return &Value{Quantity: q.Value()}, nil
}

// HardQuantity returns the hard threshold of a signal as an amount on a signal of the given capacity, and
// false when there is none (allocatable takes memory.available and nodefs.available off capacity).
func HardQuantity(ts []Threshold, s Signal, capacity int64) (int64, bool) {
	for _, t := range ts {
		if t.Signal == s && t.Hard() {
			return t.Value.of(capacity), true
		}
	}
	return 0, false
}
