package server

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ttlCache keeps review answers for a while, at most max entries: callers cannot grow it without bound by
// sending many distinct tokens or requests. When full, expired entries go first, then the entries closest to
// expiring. Safe for concurrent use.
type ttlCache[V any] struct {
	clock clock.PassiveClock
	max   int

	mu      sync.Mutex
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[V any](clk clock.PassiveClock, max int) *ttlCache[V] {
	return &ttlCache[V]{clock: clk, max: max, entries: map[string]ttlEntry[V]{}}
}

// get returns the value kept for key, unless it has expired.
func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.clock.Now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// set keeps value for key during ttl.
func (c *ttlCache[V]) set(key string, value V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		c.evictLocked(now)
	}
	c.entries[key] = ttlEntry[V]{value: value, expires: now.Add(ttl)}
}

// evictLocked makes room for one entry: every expired entry goes, or else the one that expires first.
func (c *ttlCache[V]) evictLocked(now time.Time) {
	var first string
	var firstAt time.Time
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
			continue
		}
		if first == "" || e.expires.Before(firstAt) {
			first, firstAt = k, e.expires
		}
	}
	if len(c.entries) >= c.max && first != "" {
		delete(c.entries, first)
	}
}

func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
