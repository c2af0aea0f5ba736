package logd

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// maxAttachQueue is how far an attach session may fall behind the container's output before it is dropped.
const maxAttachQueue = 1 << 20

// fanout copies a stream to the writers of attach sessions. Each session has a queue and a goroutine of its
// own: a stalled session never holds up the container's output nor the other sessions. A session that falls
// maxAttachQueue bytes behind, or whose write fails, is dropped (its Dropped channel closes and its attach
// call ends), as upstream drops an attach client that cannot keep up. Safe for concurrent use.
type fanout struct {
	mu   sync.Mutex
	next int
	subs map[int]*attachSub
}

// attachSub is one attach session's queue.
type attachSub struct {
	ch      chan []byte
	queued  atomic.Int64
	dropped chan struct{}
	once    sync.Once
}

func (s *attachSub) close() { s.once.Do(func() { close(s.ch); close(s.dropped) }) }

// add joins w to the stream. dropped closes when the session is dropped or removed; remove ends it.
func (f *fanout) add(w io.Writer) (dropped <-chan struct{}, remove func()) {
	sub := &attachSub{ch: make(chan []byte, 256), dropped: make(chan struct{})}
	f.mu.Lock()
	if f.subs == nil {
		f.subs = map[int]*attachSub{}
	}
	id := f.next
	f.next++
	f.subs[id] = sub
	f.mu.Unlock()
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		failed := false
		for b := range sub.ch {
			sub.queued.Add(-int64(len(b)))
			if !failed {
				if _, err := w.Write(b); err != nil {
					failed = true
					f.drop(id)
				}
			}
		}
	}()
	// Removing a session lets what is queued for it reach w first (a container's last words, written just
	// before it exited), for at most DrainTimeout.
	return sub.dropped, func() {
		f.drop(id)
		select {
		case <-flushed:
		case <-time.After(DrainTimeout):
		}
	}
}

func (f *fanout) drop(id int) {
	f.mu.Lock()
	sub := f.subs[id]
	delete(f.subs, id)
	f.mu.Unlock()
	if sub != nil {
		sub.close()
	}
}

// write queues p for every session, dropping those too far behind; it never waits for one.
func (f *fanout) write(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, sub := range f.subs {
		if sub.queued.Load()+int64(len(p)) > maxAttachQueue {
			delete(f.subs, id)
			sub.close()
			continue
		}
		sub.queued.Add(int64(len(p)))
		select {
		case sub.ch <- append([]byte(nil), p...):
		default:
			sub.queued.Add(-int64(len(p)))
			delete(f.subs, id)
			sub.close()
		}
	}
}
