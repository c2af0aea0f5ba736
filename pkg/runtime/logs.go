package runtime

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

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
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return
	}
	tag := "F"
	if partial {
		tag = "P"
	}
	var b bytes.Buffer
	b.Grow(len(line) + 48)
	b.WriteString(l.clock.Now().UTC().Format(time.RFC3339Nano))
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteByte(' ')
	b.WriteString(tag)
	b.WriteByte(' ')
	b.Write(line)
	b.WriteByte('\n')
	_, _ = l.w.Write(b.Bytes())
}

func (l *logFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		_ = l.w.Close()
		l.w = nil
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
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.record(w.stream, false, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	for len(w.buf) >= maxLogLine {
		w.log.record(w.stream, true, w.buf[:maxLogLine])
		w.buf = w.buf[maxLogLine:]
	}
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

// fanout copies a stream to the writers of attach sessions. A slow attacher does not stall the container
// beyond its own write; a failed one is dropped.
type fanout struct {
	mu   sync.Mutex
	next int
	subs map[int]io.Writer
}

func (f *fanout) add(w io.Writer) (remove func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[int]io.Writer{}
	}
	id := f.next
	f.next++
	f.subs[id] = w
	return func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}
}

func (f *fanout) write(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, w := range f.subs {
		if _, err := w.Write(p); err != nil {
			delete(f.subs, id)
		}
	}
}
