package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/utils/clock"
)

// timeFormatOut is how a line's timestamp is written when asked for (fixed width, as upstream's).
const timeFormatOut = "2006-01-02T15:04:05.000000000Z07:00"

// record is one line of a CRI log file: "<RFC3339Nano> <stream> <P|F>[:<more tags>] <content>".
type record struct {
	ts      time.Time
	stream  string
	partial bool
	content []byte
}

// parseRecord parses one CRI log line, without its trailing newline. content aliases line.
func parseRecord(line []byte) (record, error) {
	var r record
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return r, errors.New("timestamp is not found")
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("unexpected timestamp %q: %w", ts, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, errors.New("stream type is not found")
	}
	if s := string(stream); s != "stdout" && s != "stderr" {
		return r, fmt.Errorf("unexpected stream type %q", s)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		if len(rest) == 0 {
			return r, errors.New("log tag is not found")
		}
		tags, content = rest, nil // an empty line may lose its separator
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	switch string(tag) {
	case "P":
		r.partial = true
	case "F":
	default:
		return r, fmt.Errorf("unexpected log tag %q", tag)
	}
	r.ts, r.stream, r.content = t, string(stream), content
	return r, nil
}

// line is one whole line of a container's output: its records joined.
type line struct {
	ts      time.Time // of its first record
	stream  string
	content []byte
	ended   bool // ended by an F record (else cut short at the end of the log)
}

// joiner joins partial records into lines, per stream.
type joiner struct {
	pending map[string]*line
}

// add takes a record and returns the line it completes, if any.
func (j *joiner) add(r record) (line, bool) {
	if j.pending == nil {
		j.pending = map[string]*line{}
	}
	p := j.pending[r.stream]
	if p == nil {
		p = &line{ts: r.ts, stream: r.stream}
		j.pending[r.stream] = p
	}
	p.content = append(p.content, r.content...)
	if r.partial {
		return line{}, false
	}
	delete(j.pending, r.stream)
	p.ended = true
	return *p, true
}

// flush returns the lines still open (partial records never ended), oldest first.
func (j *joiner) flush() []line {
	var out []line
	for _, s := range []string{"stdout", "stderr"} {
		if p := j.pending[s]; p != nil {
			out = append(out, *p)
		}
	}
	j.pending = nil
	return out
}

// logOptions say which part of a log to read and how, as v1.PodLogOptions does.
type logOptions struct {
	tail       int64 // last lines only; -1 for all
	limitBytes int64 // stop after this many bytes; -1 for no limit
	since      time.Time
	timestamps bool
	follow     bool
}

// errLimit ends reading when limitBytes is reached.
var errLimit = errors.New("byte limit reached")

// lineWriter writes lines as the options ask: since, timestamps, limitBytes.
type lineWriter struct {
	w      io.Writer
	opts   logOptions
	remain int64
}

func newLineWriter(w io.Writer, opts logOptions) *lineWriter {
	lw := &lineWriter{w: w, opts: opts, remain: -1}
	if opts.limitBytes >= 0 {
		lw.remain = opts.limitBytes
	}
	return lw
}

// keep says whether a line passes the since filter.
func (lw *lineWriter) keep(l line) bool { return lw.opts.since.IsZero() || !l.ts.Before(lw.opts.since) }

func (lw *lineWriter) write(l line) error {
	if !lw.keep(l) {
		return nil
	}
	var b []byte
	if lw.opts.timestamps {
		b = append(b, l.ts.UTC().Format(timeFormatOut)...)
		b = append(b, ' ')
	}
	b = append(b, l.content...)
	if l.ended {
		b = append(b, '\n')
	}
	limited := false
	if lw.remain >= 0 && int64(len(b)) >= lw.remain {
		b, limited = b[:lw.remain], true
	}
	if _, err := lw.w.Write(b); err != nil {
		return err
	}
	if lw.remain >= 0 {
		lw.remain -= int64(len(b))
	}
	if limited {
		return errLimit
	}
	return nil
}

// follower says whether to keep following a log at its end: while the container is running. Nil never
// follows.
type follower struct {
	running  func() bool
	clock    clock.Clock
	interval time.Duration
}

// readLog writes the log at path to w as opts ask: the lines of the CRI records, joined, optionally only the
// last opts.tail ones, and, when following, the lines written later until the container stops (then the
// rest of the file) or ctx ends. A log file replaced meanwhile (rotation) is followed into the new file.
func readLog(ctx context.Context, path string, opts logOptions, w io.Writer, f *follower) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer func() { _ = file.Close() }()
	lw := newLineWriter(w, opts)
	var (
		j       joiner
		ring    []line // the last opts.tail lines, while reading what was there
		tailing = opts.tail >= 0
		carry   []byte // a line not yet ended by a newline
		r       = bufio.NewReaderSize(file, 64*1024)
	)
	emit := func(l line) error {
		if !tailing {
			return lw.write(l)
		}
		if opts.tail == 0 || !lw.keep(l) {
			return nil
		}
		if int64(len(ring)) == opts.tail {
			ring = ring[1:]
		}
		ring = append(ring, l)
		return nil
	}
	finish := func() error {
		for _, l := range j.flush() {
			if err := emit(l); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		chunk, err := r.ReadBytes('\n')
		if len(chunk) > 0 {
			if chunk[len(chunk)-1] != '\n' {
				carry = append(carry, chunk...)
			} else {
				whole := append(carry, chunk[:len(chunk)-1]...)
				carry = nil
				if rec, perr := parseRecord(whole); perr == nil {
					if l, ok := j.add(rec); ok {
						if err := emit(l); err != nil {
							return ignoreLimit(err)
						}
					}
				}
			}
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("read log: %w", err)
		}
		// At the end of what is written so far.
		if tailing {
			tailing = false
			for _, l := range ring {
				if err := lw.write(l); err != nil {
					return ignoreLimit(err)
				}
			}
			ring = nil
		}
		if f == nil || !opts.follow {
			if rec, perr := parseRecord(carry); len(carry) > 0 && perr == nil {
				if l, ok := j.add(rec); ok {
					if err := emit(l); err != nil {
						return ignoreLimit(err)
					}
				}
			}
			return ignoreLimit(finish())
		}
		if next, ok := replaced(file, path); ok {
			_ = file.Close()
			file, carry = next, nil
			r.Reset(file)
			continue
		}
		if !f.running() {
			// Drain what the container wrote before it stopped, then end.
			f = nil
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.clock.After(f.interval):
		}
	}
}

func ignoreLimit(err error) error {
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// replaced opens path when it is no longer the file open as f (the log was rotated).
func replaced(f *os.File, path string) (*os.File, bool) {
	cur, err := f.Stat()
	if err != nil {
		return nil, false
	}
	st, err := os.Stat(path)
	if err != nil || os.SameFile(cur, st) {
		return nil, false
	}
	next, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	return next, true
}
