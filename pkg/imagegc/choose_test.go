package imagegc

import (
	"strings"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	now := time.Unix(100000, 0)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	img := func(id string, size int64, firstAgo, usedAgo time.Duration) candidate {
		c := candidate{id: id, size: size, imageRecord: imageRecord{FirstDetected: ago(firstAgo)}}
		if usedAgo > 0 {
			c.LastUsed = ago(usedAgo)
		}
		return c
	}
	inUse := img("in-use", 500, time.Hour, time.Second)
	inUse.inUse = true
	pinned := img("pause", 500, time.Hour, 0)
	pinned.pinned = true
	all := []candidate{
		img("used-recently", 100, time.Hour, time.Minute),
		img("used-long-ago", 100, time.Hour, 50*time.Minute),
		img("never-used", 100, 30*time.Minute, 0),
		img("just-pulled", 100, time.Minute, 0),
		inUse, pinned,
	}
	for _, tc := range []struct {
		name      string
		want      int64
		chosen    string
		freedWant int64
	}{
		{"least recently used first: never used, then used long ago", 150, "never-used used-long-ago", 200},
		{"all that may go", 1 << 40, "never-used used-long-ago used-recently", 300},
		{"nothing to free", 0, "", 0},
	} {
		got, freed := choose(all, now, 2*time.Minute, tc.want)
		var ids []string
		for _, c := range got {
			ids = append(ids, c.id)
		}
		if strings.Join(ids, " ") != tc.chosen || freed != tc.freedWant {
			t.Errorf("%s: chose %v (%d bytes), want %s (%d)", tc.name, ids, freed, tc.chosen, tc.freedWant)
		}
	}
	old := tooOld(all, now, 2*time.Minute, 40*time.Minute)
	if len(old) != 1 || old[0].id != "used-long-ago" {
		t.Errorf("older than 40 min: %v, want used-long-ago (never-used was first seen 30 min ago)", old)
	}
	if tooOld(all, now, 2*time.Minute, 0) != nil {
		t.Error("a maximum age of 0 removes nothing")
	}
}

func TestToFree(t *testing.T) {
	for _, tc := range []struct {
		capacity, available int64
		want                int64
	}{
		{1000, 200, 0},  // 80% used, below 85%
		{1000, 150, 50}, // 85%: down to 80% used, 200 available
		{1000, 50, 150}, // 95%
		{0, 0, 0},       // unknown filesystem
		{1000, -1, 0},   // unknown available
		{1000, 1000, 0}, // empty
	} {
		if got := toFree(tc.capacity, tc.available, 100, 80); got != 0 {
			t.Errorf("a high threshold of 100 frees %d", got)
		}
		if got := toFree(tc.capacity, tc.available, 85, 80); got != tc.want {
			t.Errorf("capacity %d available %d: free %d, want %d", tc.capacity, tc.available, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		high, low int
		ok        bool
	}{{85, 80, true}, {100, 0, true}, {80, 85, false}, {101, 80, false}, {85, -1, false}} {
		if err := Validate(tc.high, tc.low); (err == nil) != tc.ok {
			t.Errorf("high %d low %d: %v", tc.high, tc.low, err)
		}
	}
}
