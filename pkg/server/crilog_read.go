package server

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nodeagent/kubelet/pkg/containerlogs"
)

// Bounds of the memory one log read uses, whatever the log holds: a record is read in pieces of at most
// readBufSize bytes, a header must fit in maxHeaderSize, and a line's records are joined in at most
// maxJoinSize bytes (a longer line is written as it comes).
const (
	readBufSize   = 64 << 10
	maxHeaderSize = 1 << 10
	maxJoinSize   = 256 << 10
)

// piece is a part of one CRI record: its header, and content read so far; a record longer than the read
// buffer, or cut short at the end of what is written, comes in several pieces.
type piece struct {
	header
	content []byte // valid until the next read
	last    bool   // the record's newline was read
}

// pieceReader reads the records of a CRI log in pieces, never holding more than a read buffer and a header.
// Lines that are not records are skipped.
type pieceReader struct {
	r        *bufio.Reader
	inRecord bool   // a record's header was read and its newline not yet
	cur      header // that record's header
	head     []byte // the start of a record whose header is not whole yet
	skipping bool   // inside a line that is not a record
}

func newPieceReader(r io.Reader) *pieceReader {
	return &pieceReader{r: bufio.NewReaderSize(r, readBufSize)}
}

// reset starts reading another file (after a rotation).
func (pr *pieceReader) reset(r io.Reader) {
	pr.r.Reset(r)
	pr.inRecord, pr.head, pr.skipping = false, nil, false
}

// next returns the next piece, or io.EOF at the end of what is written so far (reading again later goes on
// from there).
func (pr *pieceReader) next() (piece, error) {
	for {
		chunk, err := pr.r.ReadSlice('\n')
		ended := err == nil
		if errors.Is(err, bufio.ErrBufferFull) {
			err = nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return piece{}, err
		}
		if len(chunk) == 0 {
			return piece{}, io.EOF
		}
		if ended {
			chunk = chunk[:len(chunk)-1]
		}
		switch {
		case pr.skipping:
			pr.skipping = !ended
			continue
		case pr.inRecord:
			pr.inRecord = !ended
			return piece{header: pr.cur, content: chunk, last: ended}, nil
		}
		data := chunk
		if len(pr.head) > 0 {
			data = append(pr.head, chunk...)
			pr.head = nil
		}
		h, n, perr := parseHeader(data, ended)
		switch {
		case errors.Is(perr, errIncomplete) && len(data) <= maxHeaderSize:
			pr.head = append([]byte(nil), data...)
			continue
		case perr != nil:
			pr.skipping = !ended
			continue
		}
		pr.cur, pr.inRecord = h, !ended
		return piece{header: h, content: data[n:], last: ended}, nil
	}
}

// openLine is a line of one stream whose end has not been read yet.
type openLine struct {
	header        // of its first record
	kept   bool   // it passes the since filter
	n      int    // how much of its content is joined so far
	buf    []byte // that content, kept only when the line may be written
	// streaming: the line outgrew the join buffer; it was committed then and its pieces are written as they
	// come, when emit says so.
	streaming, emit bool
}

// assembler joins the records of each stream into lines and writes them in the order they end. Each line
// is committed once: when it ends, when it outgrows the join buffer (it is then written as it comes), or
// when a read without follow ends inside it. Committed lines that pass the since filter are counted, and
// written once skip of them have gone by: a first pass with no writer counts the lines, for tailLines.
type assembler struct {
	opts      logOptions
	lw        *limitWriter // nil: count only
	skip      int64
	committed int64
	open      map[string]*openLine
}

func newAssembler(opts logOptions, lw *limitWriter, skip int64) *assembler {
	return &assembler{opts: opts, lw: lw, skip: skip, open: map[string]*openLine{}}
}

// keepLimit is how much of a joined line is kept: with a byte limit a line never needs more than the limit
// and its timestamp. Lines outgrow the join buffer at maxJoinSize whatever the limit, so that a limit changes
// where the output is cut, never its order.
func (a *assembler) keepLimit() int {
	if a.opts.limitBytes >= 0 && a.opts.limitBytes < maxJoinSize {
		return int(a.opts.limitBytes) + len(timeFormatOut) + 1
	}
	return maxJoinSize
}

func (a *assembler) add(p piece) error {
	l := a.open[p.stream]
	if l == nil {
		l = &openLine{header: p.header, kept: a.opts.since.IsZero() || !p.ts.Before(a.opts.since)}
		a.open[p.stream] = l
	}
	switch {
	case l.streaming:
		if err := a.write(l.emit, p.content); err != nil {
			return err
		}
	case len(p.content) <= maxJoinSize-l.n:
		a.join(l, p.content)
	default:
		l.streaming, l.emit = true, a.commit(l)
		if err := a.writeStart(l); err != nil {
			return err
		}
		if err := a.write(l.emit, p.content); err != nil {
			return err
		}
		l.buf = nil
	}
	if !p.last || p.partial {
		return nil
	}
	delete(a.open, p.stream)
	if !l.streaming {
		l.emit = a.commit(l)
		if err := a.writeStart(l); err != nil {
			return err
		}
	}
	return a.write(l.emit, []byte{'\n'})
}

// join adds b to what is joined of l. Both passes count the same bytes, so that lines outgrow the join
// buffer, and are committed, at the same point; only a line that may be written keeps them.
func (a *assembler) join(l *openLine, b []byte) {
	l.n += len(b)
	if a.lw == nil || !l.kept {
		return
	}
	b = b[:min(len(b), max(0, a.keepLimit()-len(l.buf)))]
	if need := len(l.buf) + len(b); need > cap(l.buf) { // grow by doubling: a long line costs twice its size
		l.buf = append(make([]byte, 0, max(2*cap(l.buf), need, 256)), l.buf...)
	}
	l.buf = append(l.buf, b...)
}

// flush commits the lines still open (records that never ended), stdout first, and writes them unended.
func (a *assembler) flush() error {
	for _, s := range []string{"stdout", "stderr"} {
		l := a.open[s]
		if l == nil {
			continue
		}
		delete(a.open, s)
		if !l.streaming {
			l.emit = a.commit(l)
			if err := a.writeStart(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// commit counts a line that passes the since filter and says whether it is written.
func (a *assembler) commit(l *openLine) bool {
	if !l.kept {
		return false
	}
	a.committed++
	return a.lw != nil && a.committed > a.skip
}

// writeStart writes a committed line's timestamp (when asked for) and what was joined of it.
func (a *assembler) writeStart(l *openLine) error {
	if a.opts.timestamps {
		if err := a.write(l.emit, []byte(l.ts.UTC().Format(timeFormatOut)+" ")); err != nil {
			return err
		}
	}
	return a.write(l.emit, l.buf)
}

func (a *assembler) write(emit bool, b []byte) error {
	if !emit || len(b) == 0 {
		return nil
	}
	return a.lw.write(b)
}

// errLimit ends reading when limitBytes is reached.
var errLimit = errors.New("byte limit reached")

// limitWriter writes until limitBytes are written (-1: no limit).
type limitWriter struct {
	w      io.Writer
	remain int64
}

func (lw *limitWriter) write(b []byte) error {
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

// readLog writes the log at path to w as opts ask: the lines of the CRI records, each stream's records
// joined, optionally only the last opts.tail ones, and, when following, the lines written later until the
// container stops (then the rest of the file) or ctx ends. A log file replaced meanwhile (rotation) is
// followed into the new file. Its memory is bounded whatever the log holds (see maxJoinSize).
func readLog(ctx context.Context, path string, opts logOptions, w io.Writer, f *follower) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer func() { _ = file.Close() }()
	var (
		skip int64
		end  int64 = -1 // where a read without follow stops: the end the first pass saw
	)
	if opts.tail >= 0 {
		count := newAssembler(opts, nil, 0)
		if err := readPieces(ctx, newPieceReader(file), count); err != nil {
			return err
		}
		if !opts.follow || f == nil {
			if err := count.flush(); err != nil {
				return err
			}
			if end, err = file.Seek(0, io.SeekCurrent); err != nil {
				return fmt.Errorf("read log: %w", err)
			}
		}
		skip = max(0, count.committed-opts.tail)
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("read log: %w", err)
		}
	}
	var src io.Reader = file
	if end >= 0 {
		src = io.LimitReader(file, end)
	}
	pr := newPieceReader(src)
	a := newAssembler(opts, &limitWriter{w: w, remain: opts.limitBytes}, skip)
	for {
		if err := readPieces(ctx, pr, a); err != nil {
			if opts.follow && ctx.Err() != nil {
				return nil // the caller went away
			}
			return ignoreLimit(err)
		}
		if f == nil || !opts.follow {
			return ignoreLimit(a.flush())
		}
		// At the end of what is written so far.
		if next, ok := replaced(file, path); ok {
			// The runtime wrote to the old file until it reopened the new one, which exists now: what came
			// after the last read is read before moving on.
			if err := readPieces(ctx, pr, a); err != nil {
				_ = next.Close()
				if opts.follow && ctx.Err() != nil {
					return nil
				}
				return ignoreLimit(err)
			}
			// A log rotated more than once since the last look: the files between are read whole first.
			for _, between := range rotatedAfter(file, path) {
				if err := readRotated(ctx, between, pr, a); err != nil {
					_ = next.Close()
					if opts.follow && ctx.Err() != nil {
						return nil
					}
					return ignoreLimit(err)
				}
			}
			_ = file.Close()
			file = next
			pr.reset(file)
			continue
		}
		if !f.running() {
			// Drain what the container wrote before it stopped, then end.
			f = nil
			continue
		}
		if fl, ok := w.(interface{ Flush() error }); ok {
			if err := fl.Flush(); err != nil {
				return nil // the caller went away
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.clock.After(f.interval):
		}
	}
}

// readPieces feeds a the pieces read until the end of what is written so far, or until ctx ends.
func readPieces(ctx context.Context, pr *pieceReader, a *assembler) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := pr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		if err := a.add(p); err != nil {
			return err
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

// rotatedAfter lists the files the log at path was rotated to after the one open as f ("<path>.<timestamp>",
// gzipped or not), oldest first; none when f is not among them (it was compressed or removed meanwhile:
// what follows it cannot be placed).
func rotatedAfter(f *os.File, path string) []string {
	cur, err := f.Stat()
	if err != nil {
		return nil
	}
	names, err := containerlogs.RotatedFiles(path) // oldest first; "X" before "X.gz"
	if err != nil {
		return nil
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	var out []string
	found := false
	for _, n := range names {
		if strings.HasSuffix(n, ".tmp") || strings.HasSuffix(n, ".gz") && have[strings.TrimSuffix(n, ".gz")] {
			continue // a compression under way: its plain file is still there
		}
		if !found {
			if st, err := os.Stat(n); err == nil && os.SameFile(cur, st) {
				found = true
			}
			continue
		}
		out = append(out, n)
	}
	return out
}

// readRotated feeds a the whole of a rotated log file, gzipped or not.
func readRotated(ctx context.Context, name string, pr *pieceReader, a *assembler) error {
	f, err := os.Open(name)
	if err != nil {
		return nil // pruned meanwhile: nothing to read
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil // half written or damaged: skipped, as a file pruned
		}
		r = zr
	}
	pr.reset(r)
	return readPieces(ctx, pr, a)
}
