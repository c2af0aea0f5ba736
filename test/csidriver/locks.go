package csidriver

import "sync"

// keyLocks serialises the calls on one key (a volume ID) while calls on different keys run concurrently.
// An entry lives while some call holds or waits for it. The zero value is ready to use; safe for concurrent
// use.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int // calls holding or waiting for mu
}

// lock blocks until the caller holds key's lock, and returns the function that releases it.
func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = make(map[string]*keyLock)
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
