package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

var (
	bucketObjects = []byte("objects")
	bucketMeta    = []byte("meta")
	keyRV         = []byte("resourceVersion")
)

// ErrTooOld is returned when a watch asks to resume from a resourceVersion that
// has left the event window.
var ErrTooOld = errors.New("too old resource version")

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("store closed")

// ErrCommit is wrapped by the error of every write whose commit to disk
// failed; nothing of the write is stored.
var ErrCommit = errors.New("store commit failed")

// DefaultWindow is the number of events kept for watch resumption.
const DefaultWindow = 10000

// DefaultProbeInterval is how often a store whose last commit failed tries a
// commit of its own, to learn that writing works again.
const DefaultProbeInterval = 5 * time.Second

// Options tunes a Store. The zero value is usable.
type Options struct {
	// Window is how many recent events are kept for watches; DefaultWindow if 0.
	Window int
	// Logger reports stored objects skipped at load and failed commits;
	// klog's default logger if zero.
	Logger logr.Logger
	// ProbeInterval is how often a store whose last commit failed retries on
	// its own; DefaultProbeInterval if 0.
	ProbeInterval time.Duration
	// FailCommit, when set, is called before each commit; an error it returns
	// fails the commit as a failed disk write would (fault tests).
	FailCommit func() error
	// Now is the clock of Object.Stored; time.Now if nil.
	Now func() time.Time
}

// Store is the object store. It is safe for concurrent use.
type Store struct {
	db    *bolt.DB
	codec Codec

	mu        sync.RWMutex
	latest    map[string]*Object            // writers' view: committed plus queued writes
	committed map[string]map[string]*Object // readers' view, by resource then key
	rv        uint64                        // last assigned resourceVersion
	doneRV    uint64                        // last committed resourceVersion
	queue     []*pendingWrite
	corrupt   int // committed objects that do not decode (Object.Corrupt)
	opened    time.Time
	health    error  // the last commit's failure; nil once a commit succeeds
	failures  uint64 // failed commits so far
	closed    bool
	opts      Options
	log       eventLog
	notify    chan struct{} // closed and replaced after each commit

	kick     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
}

type pendingWrite struct {
	ev   Event
	done chan error
}

// Open opens (creating if needed) the store file at path and loads it.
func Open(path string, codec Codec, opts Options) (*Store, error) {
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	db, err := openBolt(path, &bolt.Options{Timeout: 5 * time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	s := &Store{
		opened:    opts.Now(),
		db:        db,
		codec:     codec,
		latest:    map[string]*Object{},
		committed: map[string]map[string]*Object{},
		notify:    make(chan struct{}),
		kick:      make(chan struct{}, 1),
		stopped:   make(chan struct{}),
		opts:      opts,
	}
	if err := s.safeLoad(path); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.doneRV = s.rv
	s.log = newEventLog(opts.Window, s.rv)
	go s.commitLoop()
	return s, nil
}

func (s *Store) load() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		objs, err := tx.CreateBucketIfNotExists(bucketObjects)
		if err != nil {
			return err
		}
		metaB, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := metaB.Get(keyRV); v != nil {
			rv, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return fmt.Errorf("corrupt resourceVersion %q: %w", v, err)
			}
			s.rv = rv
		}
		return objs.ForEach(func(k, v []byte) error {
			key := string(k)
			raw := bytes.Clone(v)
			obj, err := s.codec.Decode(key, raw)
			if err == nil {
				_, err = objectRV(obj)
			}
			if err != nil {
				// One damaged object must not keep the server down, nor be left out of the lists of its
				// kind: those fail, naming it, until an admin deletes it (corrupt.go).
				s.opts.Logger.Error(err, "A stored object cannot be decoded: reads of it and lists and watches of its resource fail until it is deleted",
					"key", key, "bytes", len(raw), "remove", RemoveHint)
				o := &Object{Key: key, Raw: raw, Corrupt: &CorruptError{Key: key, Err: err}}
				s.latest[key] = o
				s.putCommitted(o)
				s.corrupt++
				return nil
			}
			rv, _ := objectRV(obj)
			lbls, flds := s.codec.Index(key, obj)
			o := &Object{Key: key, RV: rv, Raw: raw, Labels: lbls, Fields: flds}
			s.latest[key] = o
			s.putCommitted(o)
			if rv > s.rv {
				s.rv = rv
			}
			return nil
		})
	})
}

func objectRV(obj runtime.Object) (uint64, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(acc.GetResourceVersion(), 10, 64)
}

// ResourceOf returns the resource part of a key.
func ResourceOf(key string) string {
	r, _, _ := strings.Cut(key, "/")
	return r
}

func (s *Store) putCommitted(o *Object) {
	r := ResourceOf(o.Key)
	m := s.committed[r]
	if m == nil {
		m = map[string]*Object{}
		s.committed[r] = m
	}
	m[o.Key] = o
}

// Close stops the committer after the queued writes and closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopOnce.Do(func() { s.wake() })
	<-s.stopped
	return s.db.Close()
}

// Get returns the committed object at key.
func (s *Store) Get(key string) (*Object, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.committed[ResourceOf(key)][key]
	return o, ok
}

// List returns the committed objects whose key starts with prefix, sorted by
// key, and the resourceVersion they are consistent with. prefix must start
// with "<resource>/".
func (s *Store) List(prefix string) ([]*Object, uint64) {
	s.mu.RLock()
	m := s.committed[ResourceOf(prefix)]
	out := make([]*Object, 0, len(m))
	for k, o := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, o)
		}
	}
	rv := s.doneRV
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, rv
}

// CurrentRV returns the last committed resourceVersion.
func (s *Store) CurrentRV() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.doneRV
}

// Decode returns a new typed copy of o, or o.Corrupt.
func (s *Store) Decode(o *Object) (runtime.Object, error) {
	if o.Corrupt != nil {
		return nil, o.Corrupt
	}
	return s.codec.Decode(o.Key, o.Raw)
}

// Opened returns when the store was opened: the time of Object.Stored the objects read from the file then
// would have, had it been kept.
func (s *Store) Opened() time.Time { return s.opened }

// UpdateFunc computes the next state of a key from its current state. cur is
// nil when the key is absent; it is the caller's own copy and may be modified
// and returned. Returning nil deletes the key; a result that encodes to the
// stored bytes is no change. It may be called more than once and must have no
// side effects.
type UpdateFunc func(cur runtime.Object) (runtime.Object, error)

// Update applies fn to the latest state of key and durably stores the result.
// It returns the stored object (a tombstone carrying the deletion's
// resourceVersion for a delete) and its typed form.
func (s *Store) Update(ctx context.Context, key string, fn UpdateFunc) (*Object, runtime.Object, error) {
	for {
		s.mu.RLock()
		cur, failures := s.latest[key], s.failures
		s.mu.RUnlock()
		curObj, err := s.decodeCurrent(cur)
		if err != nil {
			return nil, nil, err
		}
		next, err := fn(curObj)
		if err != nil {
			return nil, nil, err
		}
		if cur == nil && next == nil {
			return nil, nil, nil
		}
		ev := Event{Prev: cur}
		typed := next
		if next == nil {
			ev.Type = watch.Deleted
			typed = curObj
		} else if cur == nil {
			ev.Type = watch.Added
		} else {
			ev.Type = watch.Modified
			if same, err := s.sameAs(cur, next); err != nil {
				return nil, nil, err
			} else if same {
				// No change, but cur may still be queued: answer once it is durable, or start over if
				// its commit failed.
				if !s.awaitCommitted(cur, failures) {
					continue
				}
				return cur, curObj, nil
			}
		}
		lbls, flds := s.codec.Index(key, typed)
		acc, err := meta.Accessor(typed)
		if err != nil {
			return nil, nil, err
		}

		s.mu.Lock()
		if s.latest[key] != cur {
			s.mu.Unlock()
			continue
		}
		if err := s.writable(); err != nil {
			s.mu.Unlock()
			return nil, nil, err
		}
		rv := s.rv + 1
		acc.SetResourceVersion(strconv.FormatUint(rv, 10))
		raw, err := s.codec.Encode(typed)
		if err != nil {
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("encode %s: %w", key, err)
		}
		s.rv = rv
		o := &Object{Key: key, RV: rv, Raw: raw, Labels: lbls, Fields: flds, Stored: s.opts.Now()}
		ev.Object = o
		if next == nil {
			delete(s.latest, key)
		} else {
			s.latest[key] = o
		}
		p := &pendingWrite{ev: ev, done: make(chan error, 1)}
		s.queue = append(s.queue, p)
		s.mu.Unlock()
		s.wake()

		// The write is ordered: it completes even if ctx ends, so wait for it.
		if err := <-p.done; err != nil {
			return nil, nil, err
		}
		return o, typed, nil
	}
}

// decodeCurrent decodes the writers' view of a key: nil for an absent key, a CorruptError for a corrupt one.
func (s *Store) decodeCurrent(cur *Object) (runtime.Object, error) {
	if cur == nil {
		return nil, nil
	}
	if cur.Corrupt != nil {
		return nil, cur.Corrupt
	}
	obj, err := s.codec.Decode(cur.Key, cur.Raw)
	if err != nil {
		return nil, &CorruptError{Key: cur.Key, Err: err}
	}
	return obj, nil
}

// awaitCommitted waits until the write that stored o is committed, and
// reports true then, or false when a commit failed since the store had
// failed failures times (o may never be committed; the caller starts over).
func (s *Store) awaitCommitted(o *Object, failures uint64) bool {
	for {
		s.mu.RLock()
		done, failed, ch := s.doneRV >= o.RV, s.failures != failures, s.notify
		s.mu.RUnlock()
		switch {
		case failed: // first: after a failure, another write may have taken o's resourceVersion
			return false
		case done:
			return true
		}
		<-ch
	}
}

// sameAs reports whether next encodes to the same bytes as cur.
func (s *Store) sameAs(cur *Object, next runtime.Object) (bool, error) {
	acc, err := meta.Accessor(next)
	if err != nil {
		return false, err
	}
	acc.SetResourceVersion(strconv.FormatUint(cur.RV, 10))
	raw, err := s.codec.Encode(next)
	if err != nil {
		return false, fmt.Errorf("encode %s: %w", cur.Key, err)
	}
	return bytes.Equal(raw, cur.Raw), nil
}

func (s *Store) writable() error {
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Store) commitLoop() {
	defer close(s.stopped)
	probe := time.NewTicker(s.opts.ProbeInterval)
	defer probe.Stop()
	for {
		select {
		case <-s.kick:
		case <-probe.C:
			if s.Health() != nil {
				s.probe()
			}
			continue
		}
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		closed := s.closed
		s.mu.Unlock()
		if len(batch) > 0 {
			s.commit(batch)
		}
		if closed {
			s.mu.Lock()
			rest := s.queue
			s.queue = nil
			s.mu.Unlock()
			if len(rest) > 0 {
				s.commit(rest)
			}
			return
		}
	}
}

func (s *Store) commit(batch []*pendingWrite) {
	last := batch[len(batch)-1].ev.Object.RV
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObjects)
		for _, p := range batch {
			k := []byte(p.ev.Object.Key)
			if p.ev.Type == watch.Deleted {
				if err := b.Delete(k); err != nil {
					return err
				}
				continue
			}
			if err := b.Put(k, p.ev.Object.Raw); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyRV, []byte(strconv.FormatUint(last, 10)))
	})
	s.mu.Lock()
	if err != nil {
		// Nothing of the batch is on disk, and the writes queued since were computed on top of it: all of
		// them fail, and the writers' view goes back to what is committed, resourceVersions included (no
		// reader ever saw the failed ones).
		batch = append(batch, s.queue...)
		s.queue = nil
		s.latest = make(map[string]*Object, len(s.latest))
		for _, m := range s.committed {
			for k, o := range m {
				s.latest[k] = o
			}
		}
		s.rv = s.doneRV
		if s.health == nil {
			s.opts.Logger.Error(err, "Store commit failed; writes fail until a commit succeeds", "writes", len(batch))
		}
		s.health = err
		s.failures++
		close(s.notify) // wake those waiting for the failed writes (awaitCommitted)
		s.notify = make(chan struct{})
	} else {
		s.health = nil
		for _, p := range batch {
			o := p.ev.Object
			if p.ev.Type == watch.Deleted {
				if old := s.committed[ResourceOf(o.Key)][o.Key]; old != nil && old.Corrupt != nil {
					s.corrupt--
				}
				delete(s.committed[ResourceOf(o.Key)], o.Key)
			} else {
				s.putCommitted(o)
			}
			s.log.append(p.ev)
		}
		s.doneRV = last
		close(s.notify)
		s.notify = make(chan struct{})
	}
	s.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrCommit, err)
	}
	for _, p := range batch {
		p.done <- err
	}
}

// Select returns the committed objects under prefix that match, unsorted.
func (s *Store) Select(prefix string, match func(*Object) bool) []*Object {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*Object
	for k, o := range s.committed[ResourceOf(prefix)] {
		if strings.HasPrefix(k, prefix) && match(o) {
			out = append(out, o)
		}
	}
	return out
}

// DryRun computes what Update would store at key without storing it, without
// assigning a resourceVersion and without telling watchers. A new object has
// no resourceVersion; a changed one keeps the current one; for a delete it
// returns the current object.
func (s *Store) DryRun(key string, fn UpdateFunc) (*Object, runtime.Object, error) {
	s.mu.RLock()
	cur := s.latest[key]
	s.mu.RUnlock()
	curObj, err := s.decodeCurrent(cur)
	if err != nil {
		return nil, nil, err
	}
	next, err := fn(curObj)
	if err != nil || (cur == nil && next == nil) {
		return nil, nil, err
	}
	if next == nil {
		return cur, curObj, nil
	}
	acc, err := meta.Accessor(next)
	if err != nil {
		return nil, nil, err
	}
	rv := uint64(0)
	acc.SetResourceVersion("")
	if cur != nil {
		rv = cur.RV
		acc.SetResourceVersion(strconv.FormatUint(rv, 10))
	}
	raw, err := s.codec.Encode(next)
	if err != nil {
		return nil, nil, fmt.Errorf("encode %s: %w", key, err)
	}
	lbls, flds := s.codec.Index(key, next)
	return &Object{Key: key, RV: rv, Raw: raw, Labels: lbls, Fields: flds}, next, nil
}
