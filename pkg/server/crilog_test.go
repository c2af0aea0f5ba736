package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestParseRecord(t *testing.T) {
	tests := []struct {
		name, in string
		stream   string
		partial  bool
		content  string
		wantErr  string
	}{
		{"full line", "2016-10-06T00:17:09.669794202Z stdout F log content 1", "stdout", false, "log content 1", ""},
		{"partial", "2016-10-06T00:17:09.669794203Z stderr P part", "stderr", true, "part", ""},
		{"offset timestamp", "2016-10-06T02:17:09.6697942+02:00 stdout F x", "stdout", false, "x", ""},
		{"empty content", "2016-10-06T00:17:09Z stdout F ", "stdout", false, "", ""},
		{"empty content, no separator", "2016-10-06T00:17:09Z stdout F", "stdout", false, "", ""},
		{"more tags", "2016-10-06T00:17:09Z stdout F:x:y keep  spaces ", "stdout", false, "keep  spaces ", ""},
		{"bad timestamp", "yesterday stdout F x", "", false, "", "unexpected timestamp"},
		{"bad stream", "2016-10-06T00:17:09Z stdin F x", "", false, "", "unexpected stream type"},
		{"bad tag", "2016-10-06T00:17:09Z stdout X x", "", false, "", "unexpected log tag"},
		{"no stream", "2016-10-06T00:17:09Z", "", false, "", "timestamp is not found"},
		{"no tag", "2016-10-06T00:17:09Z stdout ", "", false, "", "log tag is not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseRecord([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.stream != tt.stream || r.partial != tt.partial || string(r.content) != tt.content || r.ts.IsZero() {
				t.Errorf("got %+v", r)
			}
		})
	}
}

// A log where stdout's first line comes in three records, interleaved with stderr.
const sampleLog = `2025-01-01T00:00:01.000000001Z stdout P hel
2025-01-01T00:00:02Z stderr F warning 1
2025-01-01T00:00:03Z stdout P lo wor
2025-01-01T00:00:04Z stdout F ld
not a record
2025-01-01T00:00:05Z stdout F line 2
2025-01-01T00:00:06Z stderr F warning 2
2025-01-01T00:00:07Z stdout F line 3
`

func writeLog(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadLog(t *testing.T) {
	all := logOptions{tail: -1, limitBytes: -1}
	with := func(f func(*logOptions)) logOptions { o := all; f(&o); return o }
	tests := []struct {
		name string
		log  string
		opts logOptions
		want string
	}{
		{"all, partials joined", sampleLog, all, "warning 1\nhello world\nline 2\nwarning 2\nline 3\n"},
		{"tail 2", sampleLog, with(func(o *logOptions) { o.tail = 2 }), "warning 2\nline 3\n"},
		{"tail 0", sampleLog, with(func(o *logOptions) { o.tail = 0 }), ""},
		{"tail more than there is", sampleLog, with(func(o *logOptions) { o.tail = 100 }), "warning 1\nhello world\nline 2\nwarning 2\nline 3\n"},
		{"since", sampleLog, with(func(o *logOptions) { o.since = time.Date(2025, 1, 1, 0, 0, 5, 0, time.UTC) }),
			"line 2\nwarning 2\nline 3\n"},
		{"since and tail", sampleLog, with(func(o *logOptions) {
			o.since, o.tail = time.Date(2025, 1, 1, 0, 0, 5, 0, time.UTC), 5
		}), "line 2\nwarning 2\nline 3\n"},
		{"timestamps of the first record", sampleLog, with(func(o *logOptions) { o.timestamps, o.tail = true, 4 }),
			"2025-01-01T00:00:01.000000001Z hello world\n2025-01-01T00:00:05.000000000Z line 2\n" +
				"2025-01-01T00:00:06.000000000Z warning 2\n2025-01-01T00:00:07.000000000Z line 3\n"},
		{"limitBytes cuts a line", sampleLog, with(func(o *logOptions) { o.limitBytes = 14 }), "warning 1\nhell"},
		{"limitBytes exact", sampleLog, with(func(o *logOptions) { o.limitBytes = 10 }), "warning 1\n"},
		{"unended partial at the end", "2025-01-01T00:00:01Z stdout F a\n2025-01-01T00:00:02Z stdout P b", all, "a\nb"},
		{"empty file", "", all, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := readLog(context.Background(), writeLog(t, tt.log), tt.opts, &out, nil); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("got %q\nwant %q", out.String(), tt.want)
			}
		})
	}
}

func TestReadLogMissingFile(t *testing.T) {
	if err := readLog(context.Background(), filepath.Join(t.TempDir(), "0.log"), logOptions{tail: -1, limitBytes: -1}, &bytes.Buffer{}, nil); err == nil {
		t.Error("want an error")
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReadLogFollowsGrowingFileUntilContainerStops(t *testing.T) {
	path := writeLog(t, "2025-01-01T00:00:01Z stdout F one\n2025-01-01T00:00:02Z stdout F two\n")
	var running atomic.Bool
	running.Store(true)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- readLog(context.Background(), path, logOptions{tail: 1, limitBytes: -1, follow: true}, out,
			&follower{running: running.Load, clock: clock.RealClock{}, interval: 10 * time.Millisecond})
	}()
	waitFor(t, "the tail", func() bool { return out.String() == "two\n" })
	appendFile(t, path, "2025-01-01T00:00:03Z stdout F three\n2025-01-01T00:00:04Z stdout P fo")
	waitFor(t, "the new line", func() bool { return out.String() == "two\nthree\n" })
	appendFile(t, path, "ur\n2025-01-01T00:00:05Z stdout F \n") // the end of a record, then its line's end
	waitFor(t, "the joined line", func() bool { return out.String() == "two\nthree\nfour\n" })
	appendFile(t, path, "2025-01-01T00:00:06Z stderr F last words\n")
	running.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end when the container stopped")
	}
	if got := out.String(); got != "two\nthree\nfour\nlast words\n" {
		t.Errorf("got %q", got)
	}
}

func TestReadLogFollowsRotation(t *testing.T) {
	path := writeLog(t, "2025-01-01T00:00:01Z stdout F old\n")
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- readLog(ctx, path, logOptions{tail: -1, limitBytes: -1, follow: true}, out,
			&follower{running: func() bool { return true }, clock: clock.RealClock{}, interval: 10 * time.Millisecond})
	}()
	waitFor(t, "the old line", func() bool { return out.String() == "old\n" })
	if err := os.Rename(path, path+".20250101-000001"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "2025-01-01T00:00:02Z stdout F new\n")
	waitFor(t, "the line of the new file", func() bool { return out.String() == "old\nnew\n" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A log rotated several times between two looks of the follower: the files between are read whole, the
// older ones gzipped already, so that no line is skipped.
func TestReadLogFollowsSeveralRotations(t *testing.T) {
	path := writeLog(t, "2025-01-01T00:00:01Z stdout F one\n")
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	clk := clocktesting.NewFakeClock(time.Now())
	go func() {
		done <- readLog(ctx, path, logOptions{tail: -1, limitBytes: -1, follow: true}, out,
			&follower{running: func() bool { return true }, clock: clk, interval: time.Second})
	}()
	waitFor(t, "the first line", func() bool { return out.String() == "one\n" })
	// While the follower waits: the rest of the first file, then two more files, the first of them gzipped.
	appendFile(t, path, "2025-01-01T00:00:02Z stdout F two\n")
	if err := os.Rename(path, path+".20250101-000001"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "2025-01-01T00:00:03Z stdout P thr\n")
	if err := os.Rename(path, path+".20250101-000002"); err != nil {
		t.Fatal(err)
	}
	gzipFile(t, path+".20250101-000002")
	appendFile(t, path, "2025-01-01T00:00:04Z stdout F ee\n2025-01-01T00:00:05Z stdout F four\n")
	if err := os.Rename(path, path+".20250101-000003"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "2025-01-01T00:00:06Z stdout F five\n")
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(time.Second)
	waitFor(t, "every line", func() bool { return out.String() == "one\ntwo\nthree\nfour\nfive\n" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func gzipFile(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	if err := os.WriteFile(p+".gz", buf.Bytes(), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// writeBigLog writes a log whose stdout line of size bytes comes in records of at most record bytes (0: one
// record, as a runtime that does not split lines writes it), between two short lines.
func writeBigLog(t *testing.T, size, record int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintf(w, "2025-01-01T00:00:01Z stdout F before\n")
	if record <= 0 {
		record = size
	}
	chunk := bytes.Repeat([]byte{'x'}, record)
	for left := size; left > 0; left -= record {
		tag := "P"
		if left <= record {
			tag, chunk = "F", chunk[:left]
		}
		fmt.Fprintf(w, "2025-01-01T00:00:02Z stdout %s %s\n", tag, chunk)
	}
	fmt.Fprintf(w, "2025-01-01T00:00:03Z stderr F after\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

// countingWriter counts what is written and keeps the first and the last 64 bytes of it, allocating nothing
// as it goes.
type countingWriter struct {
	n          int64
	head, tail []byte
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.head == nil {
		c.head, c.tail = make([]byte, 0, 64), make([]byte, 0, 128)
	}
	c.n += int64(len(p))
	if len(c.head) < 64 {
		c.head = append(c.head, p[:min(len(p), 64-len(c.head))]...)
	}
	if len(p) >= 64 {
		c.tail = append(c.tail[:0], p[len(p)-64:]...)
	} else {
		c.tail = append(c.tail, p...)
		if len(c.tail) > 64 {
			c.tail = append(c.tail[:0], c.tail[len(c.tail)-64:]...)
		}
	}
	return len(p), nil
}

func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A 64 MiB line costs a read a small, fixed amount of memory, whether the runtime split it into records or
// not, with a byte limit, with tailLines, or read whole.
func TestReadLogMemoryIsBounded(t *testing.T) {
	const size = 64 << 20
	all := logOptions{tail: -1, limitBytes: -1}
	with := func(f func(*logOptions)) logOptions { o := all; f(&o); return o }
	for _, layout := range []struct {
		name   string
		record int
	}{{"16 KiB records", 16 << 10}, {"one record", 0}} {
		path := writeBigLog(t, size, layout.record)
		tests := []struct {
			name  string
			opts  logOptions
			n     int64
			start string
			end   string
		}{
			{"limitBytes 10", with(func(o *logOptions) { o.limitBytes = 10 }), 10, "before\nxxx", "before\nxxx"},
			{"all", all, size + 14, "before\nxxxx", "xxxx\nafter\n"},
			{"tail 2", with(func(o *logOptions) { o.tail = 2 }), size + 7, "xxxx", "xxxx\nafter\n"},
			{"tail 1 of the big line's stream and the other", with(func(o *logOptions) { o.tail = 1 }), 6, "after\n", "after\n"},
		}
		for _, tt := range tests {
			t.Run(layout.name+"/"+tt.name, func(t *testing.T) {
				var out countingWriter
				var err error
				n := allocated(func() { err = readLog(context.Background(), path, tt.opts, &out, nil) })
				if err != nil {
					t.Fatal(err)
				}
				if out.n != tt.n || !strings.HasPrefix(string(out.head), tt.start) || !strings.HasSuffix(string(out.tail), tt.end) {
					t.Errorf("wrote %d bytes %q...%q, want %d %q...%q", out.n, out.head, out.tail, tt.n, tt.start, tt.end)
				}
				if n > 2<<20 {
					t.Errorf("allocated %d MiB reading a %d MiB line", n>>20, size>>20)
				}
			})
		}
	}
}
