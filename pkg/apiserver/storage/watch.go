package storage

import (
	"context"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/watch"
)

// Event is one committed change. Object carries the change's resourceVersion;
// for a deletion it is the last state re-stamped with it. Prev is the state
// before the change (nil for an addition).
type Event struct {
	Type   watch.EventType
	Object *Object
	Prev   *Object
}

// eventLog is a ring of the most recent events, in resourceVersion order.
type eventLog struct {
	buf   []Event
	head  int // index of the oldest event
	n     int
	start uint64 // every event with RV > start is in the log
}

func newEventLog(size int, start uint64) eventLog {
	return eventLog{buf: make([]Event, size), start: start}
}

func (l *eventLog) append(ev Event) {
	if l.n == len(l.buf) {
		l.start = l.buf[l.head].Object.RV
		l.buf[l.head] = Event{}
		l.head = (l.head + 1) % len(l.buf)
		l.n--
	}
	l.buf[(l.head+l.n)%len(l.buf)] = ev
	l.n++
}

func (l *eventLog) at(i int) *Event { return &l.buf[(l.head+i)%len(l.buf)] }

// Span is the set of keys a watch or snapshot covers: every key starting with
// Prefix or, when Exact is set, the one key equal to it.
type Span struct {
	Prefix string
	Exact  bool
}

// Under returns the span of the keys starting with prefix.
func Under(prefix string) Span { return Span{Prefix: prefix} }

// Only returns the span of the one key.
func Only(key string) Span { return Span{Prefix: key, Exact: true} }

// Has reports whether key is in the span.
func (sp Span) Has(key string) bool {
	if sp.Exact {
		return key == sp.Prefix
	}
	return strings.HasPrefix(key, sp.Prefix)
}

// after returns the events with RV > rv whose key is in span.
func (l *eventLog) after(rv uint64, span Span) []Event {
	i := sort.Search(l.n, func(i int) bool { return l.at(i).Object.RV > rv })
	var out []Event
	for ; i < l.n; i++ {
		ev := l.at(i)
		if span.Has(ev.Object.Key) {
			out = append(out, *ev)
		}
	}
	return out
}

// Watch follows the events of the keys in one span. It is used by one goroutine.
type Watch struct {
	s      *Store
	span   Span
	cursor uint64
}

// Watch returns a Watch delivering the events under prefix with RV > fromRV.
// It fails with ErrTooOld when those events are no longer all kept.
func (s *Store) Watch(prefix string, fromRV uint64) (*Watch, error) {
	return s.WatchSpan(Under(prefix), fromRV)
}

// WatchSpan returns a Watch delivering the events of the keys in span with
// RV > fromRV. It fails with ErrTooOld when those events are no longer all
// kept.
func (s *Store) WatchSpan(span Span, fromRV uint64) (*Watch, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if fromRV < s.log.start {
		return nil, ErrTooOld
	}
	return &Watch{s: s, span: span, cursor: fromRV}, nil
}

// Snapshot returns the committed objects under prefix (sorted by key) and a
// Watch positioned right after them.
func (s *Store) Snapshot(prefix string) ([]*Object, *Watch) {
	return s.SnapshotSpan(Under(prefix))
}

// SnapshotSpan returns the committed objects of the keys in span (sorted by
// key) and a Watch positioned right after them.
func (s *Store) SnapshotSpan(span Span) ([]*Object, *Watch) {
	if !span.Exact {
		objs, rv := s.List(span.Prefix) // objects and rv are read under one lock
		return objs, &Watch{s: s, span: span, cursor: rv}
	}
	s.mu.RLock()
	o, ok := s.committed[ResourceOf(span.Prefix)][span.Prefix]
	rv := s.doneRV
	s.mu.RUnlock()
	var objs []*Object
	if ok {
		objs = []*Object{o}
	}
	return objs, &Watch{s: s, span: span, cursor: rv}
}

// Cursor returns the resourceVersion the watch has seen up to.
func (w *Watch) Cursor() uint64 { return w.cursor }

// Next blocks until events past the cursor exist, ctx ends, or wake is
// signalled (then it returns no events and no error). It returns ErrTooOld when
// the watcher fell out of the event window.
func (w *Watch) Next(ctx context.Context, wake <-chan struct{}) ([]Event, error) {
	for {
		w.s.mu.RLock()
		if w.cursor < w.s.log.start {
			w.s.mu.RUnlock()
			return nil, ErrTooOld
		}
		var evs []Event
		if w.cursor < w.s.doneRV {
			evs = w.s.log.after(w.cursor, w.span)
			w.cursor = w.s.doneRV
		}
		ch := w.s.notify
		w.s.mu.RUnlock()
		if len(evs) > 0 {
			return evs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
			return nil, nil
		case <-ch:
		}
	}
}
