package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzReadLog reads arbitrary log files (records, broken records, long lines, binary) with arbitrary
// options. A read never fails or panics on what a file holds, never writes more than limitBytes, and its
// options agree with each other: a byte limit cuts the output of the same read without one, and tailLines
// at least the number of lines changes nothing.
func FuzzReadLog(f *testing.F) {
	f.Add([]byte(sampleLog), int64(-1), int64(-1), false, int64(0))
	f.Add([]byte(sampleLog), int64(2), int64(7), true, int64(5))
	f.Add([]byte("2025-01-01T00:00:01Z stdout P a\n2025-01-01T00:00:02Z stdout P b"), int64(1), int64(-1), false, int64(0))
	f.Add([]byte("2025-01-01T00:00:01Z stdout F:x:y \x00\xff\n\n\n garbage\n2025-01-01T00:00:01Z stderr F"), int64(0), int64(3), true, int64(1))
	f.Add(bytes.Repeat([]byte("2025-01-01T00:00:01.5+02:00 stderr P "+string(bytes.Repeat([]byte{'y'}, 300))+"\n"), 50), int64(-1), int64(100), false, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, tail, limit int64, timestamps bool, sinceSec int64) {
		path := filepath.Join(t.TempDir(), "0.log")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := logOptions{tail: max(tail, -1), limitBytes: max(limit, -1), timestamps: timestamps}
		if limit == 0 {
			opts.limitBytes = -1
		}
		if sinceSec > 0 {
			opts.since = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(sinceSec%100) * time.Second)
		}
		read := func(o logOptions) []byte {
			var out bytes.Buffer
			if err := readLog(context.Background(), path, o, &out, nil); err != nil {
				t.Fatalf("readLog(%+v): %v", o, err)
			}
			return out.Bytes()
		}
		got := read(opts)
		if opts.limitBytes >= 0 && int64(len(got)) > opts.limitBytes {
			t.Fatalf("wrote %d bytes with limitBytes %d", len(got), opts.limitBytes)
		}
		unlimited := opts
		unlimited.limitBytes = -1
		whole := read(unlimited)
		if !bytes.HasPrefix(whole, got) {
			t.Fatalf("with limitBytes %d: %q, not a prefix of %q", opts.limitBytes, got, whole)
		}
		if opts.tail < 0 {
			everything := opts
			everything.tail = int64(len(data)) + 1
			if again := read(everything); !bytes.Equal(again, got) {
				t.Fatalf("tailLines %d: %q, without: %q", everything.tail, again, got)
			}
		}
	})
}

// FuzzParseRecord parses arbitrary lines: an error or a record whose content is the end of the line.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte("2016-10-06T00:17:09.669794202Z stdout F log content 1"))
	f.Add([]byte("2016-10-06T00:17:09Z stdout F"))
	f.Add([]byte("x y z"))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseRecord(line)
		if err != nil {
			return
		}
		if !bytes.HasSuffix(line, r.content) || (r.stream != "stdout" && r.stream != "stderr") {
			t.Fatalf("record %+v from %q", r, line)
		}
		for i := 0; i < len(line); i++ { // a record read in pieces parses the same once its header is whole
			h, n, err := parseHeader(line[:i], false)
			if err == nil && (h != r.header() || n > i) {
				t.Fatalf("prefix %q: header %+v (%d), whole: %+v", line[:i], h, n, r)
			}
		}
	})
}
