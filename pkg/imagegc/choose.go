package imagegc

import (
	"slices"
	"time"
)

// imageRecord is what the collector keeps of one image.
type imageRecord struct {
	FirstDetected time.Time `json:"firstDetected"`
	LastUsed      time.Time `json:"lastUsed,omitzero"`
}

// candidate is an image the runtime has, with what decides whether it may go.
type candidate struct {
	id     string
	size   int64
	inUse  bool
	pinned bool
	imageRecord
}

// removable reports whether the image may be removed now: unused, not pinned, and first seen at least minAge
// ago.
func (c candidate) removable(now time.Time, minAge time.Duration) bool {
	return !c.inUse && !c.pinned && now.Sub(c.FirstDetected) >= minAge
}

// choose returns the images to remove to free at least want bytes, as upstream's freeSpace chooses them:
// the removable ones, least recently used first (then the earliest seen), until enough is chosen. It also
// returns how many bytes they hold, which is less than want when not enough may go.
func choose(cands []candidate, now time.Time, minAge time.Duration, want int64) ([]candidate, int64) {
	sorted := slices.Clone(cands)
	slices.SortStableFunc(sorted, func(a, b candidate) int {
		if c := a.LastUsed.Compare(b.LastUsed); c != 0 {
			return c
		}
		return a.FirstDetected.Compare(b.FirstDetected)
	})
	var out []candidate
	var freed int64
	for _, c := range sorted {
		if freed >= want {
			break
		}
		if !c.removable(now, minAge) {
			continue
		}
		out = append(out, c)
		freed += c.size
	}
	return out, freed
}

// tooOld returns the removable images unused for longer than maxAge (imageMaximumGCAge; 0 turns it off). An
// image never used counts from when it was first seen.
func tooOld(cands []candidate, now time.Time, minAge, maxAge time.Duration) []candidate {
	if maxAge <= 0 {
		return nil
	}
	var out []candidate
	for _, c := range cands {
		last := c.LastUsed
		if last.IsZero() {
			last = c.FirstDetected
		}
		if c.removable(now, minAge) && now.Sub(last) > maxAge {
			out = append(out, c)
		}
	}
	return out
}

// toFree is how many bytes to free on an image filesystem of capacity bytes with available free: none below
// the high threshold (percent used), else down to the low one, as upstream computes it. A high threshold of
// 100 turns it off.
func toFree(capacity, available int64, high, low int) int64 {
	if capacity <= 0 || available < 0 || high >= 100 { // 100: threshold collection off, as upstream
		return 0
	}
	used := (capacity - available) * 100 / capacity
	if used < int64(high) {
		return 0
	}
	return max(capacity*int64(100-low)/100-available, 0)
}
