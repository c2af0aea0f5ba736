package offline

import (
	"strings"

	"k8s.io/klog/v2"
)

// Tokens, objects and service environments are written off their callers' path: each write is synced to
// disk (two fsyncs), and they are made on a pod's way to its sandbox and containers, where a burst of pods
// waited behind one another's fsyncs. A write is queued (the latest for a file replacing one not written
// yet) and a goroutine, started while anything is queued, writes the files in the order they were first
// queued. Reads see what is queued. A removal drops what is queued under it and waits for a write in
// progress, so that nothing it removes is written again after it. A node that dies in the milliseconds
// between a write and its turn restarts without it, as if it had died just before: each of these is a copy
// of what the API server answered, read again when it answers again. Pods are written by their caller
// (PutPod), who orders them.

// laterWrite is a file's content waiting to be written.
type laterWrite struct {
	version string
	data    []byte
	writing bool // being written: a new content for the file is queued anew
}

// laterWrites is the queue, guarded by Store.mu. A file stays in queued until it is on disk, so that a read
// finds it in one place or the other.
type laterWrites struct {
	queued  map[string]*laterWrite // path: what to write there
	order   []string               // paths to write, in the order they were queued
	writing bool                   // a goroutine writes them
}

// cancel drops what is queued at path or under it.
func (l *laterWrites) cancel(path string) {
	kept := l.order[:0]
	for _, p := range l.order {
		if p == path || strings.HasPrefix(p, path+"/") {
			delete(l.queued, p)
			continue
		}
		kept = append(kept, p)
	}
	clear(l.order[len(kept):])
	l.order = kept
}

// writeLater queues v for rel, unless version (not empty) is what is written or queued there.
func (s *Store) writeLater(rel []string, version string, v any) error {
	path := s.path(rel)
	if s.unchanged(path, version) {
		return nil
	}
	data, err := encode(path, v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, queued := s.later.queued[path]; !queued || q.writing {
		s.later.order = append(s.later.order, path)
	}
	s.later.queued[path] = &laterWrite{version: version, data: data}
	if !s.later.writing {
		s.later.writing = true
		go s.writeQueued()
	}
	return nil
}

// writeQueued writes what is queued until nothing is.
func (s *Store) writeQueued() {
	for {
		for s.writeNext() {
		}
		s.mu.Lock()
		if len(s.later.order) == 0 {
			s.later.writing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// writeNext writes the first file queued: false when none is.
func (s *Store) writeNext() bool {
	s.io.Lock()
	defer s.io.Unlock()
	s.mu.Lock()
	if len(s.later.order) == 0 {
		s.mu.Unlock()
		return false
	}
	path := s.later.order[0]
	s.later.order[0] = ""
	s.later.order = s.later.order[1:]
	w := s.later.queued[path]
	w.writing = true
	s.mu.Unlock()
	if err := s.writeFile(path, w.version, w.data); err != nil {
		klog.Background().Error(err, "Cannot write to the checkpoint")
	}
	s.mu.Lock()
	if s.later.queued[path] == w {
		delete(s.later.queued, path)
	}
	s.mu.Unlock()
	return true
}

// Flush writes what is queued and returns once it is on disk: what the node does before it exits.
func (s *Store) Flush() {
	for s.writeNext() {
	}
}

// readKept reads the file at path into v, or what is queued for it.
func (s *Store) readKept(path string, v any) (bool, error) {
	s.mu.Lock()
	q, queued := s.later.queued[path]
	s.mu.Unlock()
	if queued {
		return decode(path, q.data, v)
	}
	return read(path, v)
}
