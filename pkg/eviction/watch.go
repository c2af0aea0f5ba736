package eviction

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// watchInterval is how often the memory watch reads the node's memory between observations.
const watchInterval = 200 * time.Millisecond

// memoryWatch reads the node's available memory several times a second and says when it has just fallen
// below a memory.available threshold: an edge, so that a node that stays under pressure is observed at the
// usual interval, not at every read.
type memoryWatch struct {
	read       func() (available, capacity int64, err error)
	thresholds []Threshold
	ticker     clock.Ticker
	below      bool // below a threshold at the last read
	failing    bool // the last read failed (logged once)
}

// newWatch returns the memory watch, or an idle one when there is nothing to watch.
func (m *Manager) newWatch() *memoryWatch {
	w := &memoryWatch{read: m.cfg.MemoryAvailable}
	for _, t := range m.cfg.Thresholds {
		if t.Signal == SignalMemoryAvailable {
			w.thresholds = append(w.thresholds, t)
		}
	}
	if w.read != nil && len(w.thresholds) > 0 {
		w.ticker = m.cfg.Clock.NewTicker(watchInterval)
	}
	return w
}

// ticks is the watch's ticker channel; nil (never ready) for an idle watch.
func (w *memoryWatch) ticks() <-chan time.Time {
	if w.ticker == nil {
		return nil
	}
	return w.ticker.C()
}

func (w *memoryWatch) stop() {
	if w.ticker != nil {
		w.ticker.Stop()
	}
}

// crossedNow reads the memory and reports whether it is below a threshold now and was not at the last read.
// A failed read is logged once and changes nothing.
func (w *memoryWatch) crossedNow(ctx context.Context) bool {
	avail, capacity, err := w.read()
	if err != nil {
		if !w.failing {
			klog.FromContext(ctx).Info("Eviction manager: memory watch cannot read the node's memory", "err", err.Error())
		}
		w.failing = true
		return false
	}
	w.failing = false
	below := memoryBelow(w.thresholds, avail, capacity)
	crossed := below && !w.below
	w.below = below
	return crossed
}

// memoryBelow reports whether available memory is below any of the thresholds.
func memoryBelow(ts []Threshold, available, capacity int64) bool {
	for _, t := range ts {
		if available < t.Value.of(capacity) {
			return true
		}
	}
	return false
}
