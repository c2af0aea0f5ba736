package logd

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The daemon's socket speaks one request per connection: a JSON line (request), answered by a JSON line
// (response). An attach is then followed by frames of output, each a kind byte and a big-endian uint32
// length before its bytes, until a frameEnd frame carrying the final response. A hold is answered and then
// kept open until the client goes: the runtime holds one to learn at once that the daemon went away.

// maxRequest bounds a request line.
const maxRequest = 64 << 10

// maxFrame bounds an output frame a client accepts.
const maxFrame = 1 << 20

const (
	opOpen   = "open"
	opReopen = "reopen"
	opAttach = "attach"
	opDrain  = "drain"
	opClose  = "close"
	opPing   = "ping"
	opHold   = "hold"
	opLost   = "lost"
)

type request struct {
	Op        string `json:"op"`
	ID        string `json:"id,omitempty"`
	Spec      *Spec  `json:"spec,omitempty"`
	TimeoutMS int64  `json:"timeoutMs,omitempty"`
	// Stdout and Stderr say which streams an attach wants.
	Stdout bool `json:"stdout,omitempty"`
	Stderr bool `json:"stderr,omitempty"`
}

type response struct {
	Error string `json:"error,omitempty"`
	// Kind names an error a caller acts on: "notfound", "dropped".
	Kind string `json:"kind,omitempty"`
	// Version is the daemon's, in answer to a ping.
	Version string `json:"version,omitempty"`
	// Lost answers a lost request: lines each container's log lost so far.
	Lost map[string]int `json:"lost,omitempty"`
}

func responseOf(err error) response {
	if err == nil {
		return response{}
	}
	r := response{Error: err.Error()}
	switch {
	case errors.Is(err, ErrNotFound):
		r.Kind = "notfound"
	case errors.Is(err, ErrDropped):
		r.Kind = "dropped"
	}
	return r
}

func (r response) err() error {
	switch {
	case r.Error == "":
		return nil
	case r.Kind == "notfound":
		return fmt.Errorf("%s: %w", r.Error, ErrNotFound)
	case r.Kind == "dropped":
		return ErrDropped
	}
	return errors.New(r.Error)
}

const (
	frameStdout byte = 1
	frameStderr byte = 2
	frameEnd    byte = 3
)

// readLine reads one JSON line of at most maxRequest bytes into v.
func readLine(r *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return err
		}
		line = append(line, chunk...)
		if len(line) > maxRequest {
			return fmt.Errorf("line longer than %d bytes", maxRequest)
		}
		if !isPrefix {
			break
		}
	}
	return json.Unmarshal(line, v)
}

func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// frameWriter writes one stream's output as frames; the streams of one session share mu.
type frameWriter struct {
	mu   *sync.Mutex
	w    io.Writer
	kind byte
}

func (f frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := writeFrame(f.w, f.kind, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func writeFrame(w io.Writer, kind byte, p []byte) error {
	hdr := make([]byte, 5, 5+len(p))
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
	_, err := w.Write(append(hdr, p...))
	return err
}

// readFrame reads one frame into buf (grown as needed) and returns its kind and bytes.
func readFrame(r io.Reader, buf []byte) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, err
	}
	return hdr[0], buf, nil
}
