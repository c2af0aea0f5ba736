package logd

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestStreamWriterCRIFormat(t *testing.T) {
	var file, attached bytes.Buffer
	l := &logFile{w: nopCloser{&file}, clock: clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))}
	w := &streamWriter{log: l, stream: "stdout", fanout: &fanout{}}
	var mu sync.Mutex
	_, remove := w.fanout.add(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return attached.Write(p)
	}))
	defer remove()

	_, _ = w.Write([]byte("one\ntw"))
	_, _ = w.Write([]byte("o\n" + strings.Repeat("x", maxLogLine+5)))
	_ = w.Close()
	attachedLen := func() int { mu.Lock(); defer mu.Unlock(); return attached.Len() }
	for deadline := time.Now().Add(5 * time.Second); attachedLen() < 8+maxLogLine+5 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()

	want := []string{
		"2026-01-02T03:04:05.000000006Z stdout F one",
		"2026-01-02T03:04:05.000000006Z stdout F two",
		"2026-01-02T03:04:05.000000006Z stdout P " + strings.Repeat("x", maxLogLine),
		"2026-01-02T03:04:05.000000006Z stdout F xxxxx",
	}
	if got := file.String(); got != strings.Join(want, "\n")+"\n" {
		t.Fatalf("log:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if attached.String() != "one\ntwo\n"+strings.Repeat("x", maxLogLine+5) {
		t.Fatalf("attached reader got %d bytes of the wrong content", attached.Len())
	}
}

func TestStalledAttachIsDropped(t *testing.T) {
	var file bytes.Buffer
	l := &logFile{w: nopCloser{&file}, clock: clocktesting.NewFakePassiveClock(time.Now())}
	w := &streamWriter{log: l, stream: "stdout", fanout: &fanout{}}
	stall := make(chan struct{})
	defer close(stall)
	stalledDropped, removeStalled := w.fanout.add(writerFunc(func(p []byte) (int, error) { <-stall; return len(p), nil }))
	defer removeStalled()
	var got atomic.Int64
	keptDropped, removeKept := w.fanout.add(writerFunc(func(p []byte) (int, error) { got.Add(int64(len(p))); return len(p), nil }))
	defer removeKept()

	line := []byte(strings.Repeat("y", 4095) + "\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1024; i++ { // 4 MiB of output
			_, _ = w.Write(line)
			if i%64 == 0 {
				time.Sleep(time.Millisecond) // a container writes at a pace the other session keeps up with
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the container's output stalled behind an attach session that does not read")
	}
	select {
	case <-stalledDropped:
	default:
		t.Fatal("the stalled session was not dropped")
	}
	select {
	case <-keptDropped:
		t.Fatal("the session that keeps up was dropped")
	default:
	}
	for deadline := time.Now().Add(5 * time.Second); got.Load() < 4<<20 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got.Load() != 4<<20 {
		t.Fatalf("the session that keeps up got %d of %d bytes", got.Load(), 4<<20)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }
func (failingWriter) Close() error              { return nil }

// A log line that cannot be written is counted, never dropped silently.
func TestLogLinesLostAreCounted(t *testing.T) {
	l := &logFile{w: failingWriter{}, path: "/var/log/pods/x/c/0.log", clock: clocktesting.NewFakePassiveClock(time.Now())}
	w := &streamWriter{log: l, stream: "stdout", fanout: &fanout{}}
	_, _ = w.Write([]byte("one\ntwo\n"))
	if l.lost != 2 {
		t.Fatalf("lost %d lines, want 2 counted", l.lost)
	}
	l.close()
}
