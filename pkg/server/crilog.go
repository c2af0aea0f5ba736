package server

import (
	"bytes"
	"errors"
	"fmt"
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
	h, n, err := parseHeader(line, true)
	if err != nil {
		return record{}, err
	}
	return record{ts: h.ts, stream: h.stream, partial: h.partial, content: line[n:]}, nil
}

func (r record) header() header { return header{ts: r.ts, stream: r.stream, partial: r.partial} }

// header is what precedes a record's content.
type header struct {
	ts      time.Time
	stream  string
	partial bool
}

// errIncomplete means the bytes read so far end inside a record's header.
var errIncomplete = errors.New("record header is incomplete")

// parseHeader parses the header at the start of b and returns it with its length (the content starts
// there). ended says b holds the whole record; when it does not, a header that b does not yet hold entirely
// is errIncomplete.
func parseHeader(b []byte, ended bool) (header, int, error) {
	var h header
	ts, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok {
		if !ended {
			return h, 0, errIncomplete
		}
		return h, 0, errors.New("timestamp is not found")
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return h, 0, fmt.Errorf("unexpected timestamp %q: %w", ts, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		if !ended {
			return h, 0, errIncomplete
		}
		return h, 0, errors.New("stream type is not found")
	}
	if s := string(stream); s != "stdout" && s != "stderr" {
		return h, 0, fmt.Errorf("unexpected stream type %q", s)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	n := len(b) - len(content)
	if !ok {
		switch {
		case !ended:
			return h, 0, errIncomplete
		case len(rest) == 0:
			return h, 0, errors.New("log tag is not found")
		}
		tags, n = rest, len(b) // an empty line may lose its separator
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	switch string(tag) {
	case "P":
		h.partial = true
	case "F":
	default:
		return h, 0, fmt.Errorf("unexpected log tag %q", tag)
	}
	h.ts, h.stream = t, string(stream)
	return h, n, nil
}

// logOptions say which part of a log to read and how, as v1.PodLogOptions does.
type logOptions struct {
	tail       int64 // last lines only; -1 for all
	limitBytes int64 // stop after this many bytes; -1 for no limit
	since      time.Time
	timestamps bool
	follow     bool
}

// follower says whether to keep following a log at its end: while the container is running. Nil never
// follows.
type follower struct {
	running  func() bool
	clock    clock.Clock
	interval time.Duration
}
