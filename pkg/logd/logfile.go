package logd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/containerlogs"
)

// maxLogLine is the longest log line written as one CRI record; longer lines are split into partial ("P")
// records, as the CRI log format prescribes.
const maxLogLine = 16 * 1024

// logFile appends CRI-format records ("<RFC3339Nano> <stream> <P|F> <content>\n") to a container's log. It
// serialises the writers of stdout and stderr, rotates the file when it reaches its size limit (as the
// kubelet's log manager does, so that a log keeps its limits while the kubelet is down), and can be reopened
// after someone else rotated or removed it.
type logFile struct {
	mu    sync.Mutex
	path  string
	w     io.WriteCloser // the open log file; nil when the container has no log path
	clock clock.PassiveClock
	// size is what the open file holds, as far as this writer knows.
	size int64
	// maxSize rotates the file when it is reached; 0 never does. maxFiles is how many files the log keeps,
	// the current one included.
	maxSize  int64
	maxFiles int
	// tidying is set while a rotation's tidy (compressing and pruning the rotated files) runs.
	tidying atomic.Bool
	// lost counts the records that could not be written (a full disk): the first failure is logged at once,
	// the count when the log closes.
	lost int
}

func openLogFile(path string, c clock.PassiveClock, maxSize int64, maxFiles int) (*logFile, error) {
	l := &logFile{path: path, clock: c, maxSize: maxSize, maxFiles: maxFiles}
	if path == "" {
		return l, nil
	}
	if err := l.reopen(); err != nil {
		return nil, err
	}
	return l, nil
}

// reopen closes the current file and opens path again (creating it and its directory), for log rotation.
func (l *logFile) reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reopenLocked()
}

func (l *logFile) reopenLocked() error {
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
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	if l.w != nil {
		_ = l.w.Close() // a write-only file: nothing buffered to lose
	}
	l.w, l.size = f, size
	return nil
}

// check reopens the log when its file is no longer at its path: removed with its directory, or renamed by
// a rotation whose caller did not ask for a reopen (writes would otherwise go on into a file nobody sees);
// and rotates a log over its limit that no write rotated.
func (l *logFile) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.w.(*os.File)
	if l.path == "" || !ok {
		return nil
	}
	open, err := f.Stat()
	if err != nil {
		return l.reopenLocked()
	}
	cur, err := os.Stat(l.path)
	if err != nil || !os.SameFile(open, cur) {
		return l.reopenLocked()
	}
	// A log that reached its limit within a second of its last rotation waited for a free name; the
	// container may have gone quiet since.
	if l.maxSize > 0 && l.size >= l.maxSize {
		l.rotateLocked()
	}
	l.tidy() // what waited compressAfter
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
	written, err := l.w.Write(records)
	l.size += int64(written)
	if err != nil {
		l.lost += n
		if l.lost == n {
			klog.Background().Error(err, "Failed to write a container log line; later failures are counted", "path", l.path)
		}
	}
	if l.maxSize > 0 && l.size >= l.maxSize {
		l.rotateLocked()
	}
}

// rotateLocked renames the full log aside and opens a new one, then tidies the rotated files in the
// background (compressing a 10 MiB file takes a while; the container's output must not wait for it). A
// log rotated less than a second ago keeps growing until the next second's name is free.
func (l *logFile) rotateLocked() {
	rotated := containerlogs.RotatedName(l.path, l.clock.Now())
	if _, err := os.Lstat(rotated); err == nil {
		return
	}
	if err := os.Rename(l.path, rotated); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			klog.Background().Error(err, "Failed to rotate a container log", "path", l.path)
			return
		}
	}
	if err := l.reopenLocked(); err != nil {
		klog.Background().Error(err, "Failed to reopen a rotated container log; writing on into the rotated file", "path", l.path)
		return
	}
	l.tidy()
}

// compressAfter is how long a rotated file stays as it is before it is gzipped: a reader following the log
// (kubectl logs -f) that fell behind by more than one rotation still finds it by its inode.
// A variable for tests.
var compressAfter = 10 * time.Second

// tidy compresses and prunes the rotated files in the background, one tidy at a time.
func (l *logFile) tidy() {
	if l.maxFiles > 0 && l.tidying.CompareAndSwap(false, true) {
		go func() {
			defer l.tidying.Store(false)
			if err := containerlogs.Tidy(l.path, l.maxFiles, compressAfter); err != nil {
				klog.Background().Error(err, "Failed to tidy a container's rotated logs", "path", l.path)
			}
		}()
	}
}

// lostLines is how many records could not be written so far.
func (l *logFile) lostLines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
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
