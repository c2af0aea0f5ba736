package pleg

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodState is what the runtime holds for one pod: every sandbox and every container (all attempts), as the
// CRI status calls report them. The cache hands out shared values: callers must not modify them.
type PodState struct {
	UID        types.UID
	Name       string
	Namespace  string
	Sandboxes  []*runtimeapi.PodSandboxStatus
	Containers []*runtimeapi.ContainerStatus
	// SandboxOf maps a container ID to the ID of the sandbox it runs in.
	SandboxOf map[string]string
}

// Cache holds the last inspected runtime state of each pod with the time it was read. A pod missing from the
// cache has nothing in the runtime. Safe for concurrent use.
type Cache struct {
	mu        sync.Mutex
	pods      map[types.UID]cacheEntry
	timestamp time.Time // every pod's state is at least this fresh; zero until the first relist
	waiters   map[types.UID][]waiter
}

type cacheEntry struct {
	state    *PodState
	err      error
	modified time.Time
}

type waiter struct {
	min time.Time
	ch  chan cacheEntry
}

// NewCache returns an empty cache that answers no GetNewerThan until the first UpdateTime.
func NewCache() *Cache {
	return &Cache{pods: map[types.UID]cacheEntry{}, waiters: map[types.UID][]waiter{}}
}

// Get returns the cached state of uid (an empty state when the runtime has nothing for it).
func (c *Cache) Get(uid types.UID) (*PodState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.getLocked(uid)
	return e.state, e.err
}

// GetNewerThan blocks until the cached state of uid was read at or after min, then returns it.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, min time.Time) (*PodState, error) {
	c.mu.Lock()
	if e, ok := c.freshLocked(uid, min); ok {
		c.mu.Unlock()
		return e.state, e.err
	}
	w := waiter{min: min, ch: make(chan cacheEntry, 1)}
	c.waiters[uid] = append(c.waiters[uid], w)
	c.mu.Unlock()
	select {
	case e := <-w.ch:
		return e.state, e.err
	case <-ctx.Done():
		c.mu.Lock()
		ws := c.waiters[uid]
		for i := range ws {
			if ws[i].ch == w.ch {
				c.waiters[uid] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Set records the state of uid read at ts (err: the inspection failed).
func (c *Cache) Set(uid types.UID, state *PodState, err error, ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.pods[uid]; ok && e.modified.After(ts) {
		return // a newer read is already here
	}
	c.pods[uid] = cacheEntry{state: state, err: err, modified: ts}
	c.notifyLocked(uid)
}

// Delete records that the runtime has nothing for uid.
func (c *Cache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

// UpdateTime records that every pod's state is at least as fresh as ts.
func (c *Cache) UpdateTime(ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts.After(c.timestamp) {
		c.timestamp = ts
	}
	for uid := range c.waiters {
		c.notifyLocked(uid)
	}
}

// UIDs returns the pods the cache holds state for.
func (c *Cache) UIDs() []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.UID, 0, len(c.pods))
	for uid := range c.pods {
		out = append(out, uid)
	}
	return out
}

func (c *Cache) getLocked(uid types.UID) cacheEntry {
	e, ok := c.pods[uid]
	if !ok {
		return cacheEntry{state: &PodState{UID: uid}, modified: c.timestamp}
	}
	return e
}

func (c *Cache) freshLocked(uid types.UID, min time.Time) (cacheEntry, bool) {
	e, ok := c.pods[uid]
	if ok && !e.modified.Before(min) {
		return e, true
	}
	if !c.timestamp.IsZero() && !c.timestamp.Before(min) {
		return c.getLocked(uid), true
	}
	return cacheEntry{}, false
}

func (c *Cache) notifyLocked(uid types.UID) {
	ws := c.waiters[uid]
	if len(ws) == 0 {
		return
	}
	var keep []waiter
	for _, w := range ws {
		if e, ok := c.freshLocked(uid, w.min); ok {
			w.ch <- e
			continue
		}
		keep = append(keep, w)
	}
	if len(keep) == 0 {
		delete(c.waiters, uid)
	} else {
		c.waiters[uid] = keep
	}
}
