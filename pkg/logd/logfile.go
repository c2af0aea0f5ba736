package runtime

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// maxLogLine is the longest log line written as one CRI record; longer lines are split into partial ("P")
// records, as the CRI log format prescribes.
const maxLogLine = 16 * 1024

// logFile appends CRI-format records ("<RFC3339Nano> <stream> <P|F> <content>\n") to a container's log. It
// serialises the writers of stdout and stderr, and can be reopened after the kubelet rotates the file.
type logFile struct {
	mu    sync.Mutex
	path  string
	w     io.WriteCloser // the open log file; nil when the container has no log path
	clock clock.PassiveClock
	// lost counts the records that could not be written (a full disk): the first failure is logged at once,
	// the count when the log closes.
	lost int
}

func openLogFile(path string, c clock.PassiveClock) (*logFile, error) {
	l := &logFile{path: path, clock: c}
	if path == "" {
		return l, nil
	}
	if err := l.reopen(); err != nil {
		return nil, err
	}
	return l, nil
}

// reopen closes the current file and opens path again (creating it), for log rotation.
func (l *logFile) reopen() error {
	if l.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("open log %s: %w", l.path, err)
	}
	l.mu.Lock()
	old := l.w
	l.w = f
	l.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

func (l *logFile) record(stream string, partial bool, line []byte) {
	var b bytes.Buffer
	appendRecord(&b, l.clock.Now(), stream, partial, line)
	l.write(b.Bytes(), 1)
}

// appendRecord appends one CRI log record to b.
func appendRecord(b *bytes.Buffer, at time.Time, stream string, partial bool, line []byte) {
	tag := "F"
	if partial {
		tag = "P"
	}
	b.Grow(len(line) + 48)
	b.WriteString(at.UTC().Format(time.RFC3339Nano))
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteByte(' ')
	b.WriteString(tag)
	b.WriteByte(' ')
	b.Write(line)
	b.WriteByte('\n')
}

// write appends records (n of them) to the log in one write, so that a reader sees them whole and a chatty
// container costs one write per read of its output, not one per line.
func (l *logFile) write(records []byte, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil || len(records) == 0 {
		return
	}
	if _, err := l.w.Write(records); err != nil {
		l.lost += n
		if l.lost == n {
			klog.Background().Error(err, "Failed to write a container log line; later failures are counted", "path", l.path)
		}
	}
}

func (l *logFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		_ = l.w.Close()
		l.w = nil
	}
	if l.lost > 0 {
		klog.Background().Info("Container log lines lost", "path", l.path, "lines", l.lost)
	}
}

// streamWriter splits one output stream into CRI log records and copies the raw bytes to attached readers.
type streamWriter struct {
	log    *logFile
	stream string // "stdout" or "stderr"
	buf    []byte
	fanout *fanout
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.fanout.write(p)
	w.buf = append(w.buf, p...)
	var out bytes.Buffer
	n := 0
	now := w.log.clock.Now()
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		appendRecord(&out, now, w.stream, false, w.buf[:i])
		n++
		w.buf = w.buf[i+1:]
	}
	for len(w.buf) >= maxLogLine {
		appendRecord(&out, now, w.stream, true, w.buf[:maxLogLine])
		n++
		w.buf = w.buf[maxLogLine:]
	}
	w.log.write(out.Bytes(), n)
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(p), nil
}

// Close flushes an unterminated last line as a full record.
func (w *streamWriter) Close() error {
	if len(w.buf) > 0 {
		w.log.record(w.stream, false, w.buf)
		w.buf = nil
	}
	return nil
}

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
	// before it exited), for at most ioDrainTimeout.
	return sub.dropped, func() {
		f.drop(id)
		select {
		case <-flushed:
		case <-time.After(ioDrainTimeout):
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
