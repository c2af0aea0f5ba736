package runtime

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
)

// containerIO is the live stdio of a running container: its log, the streams attach sessions join, and its
// stdin pipe when the container keeps stdin open.
type containerIO struct {
	log            *logFile
	stdout, stderr *streamWriter
	stdinW         *io.PipeWriter // nil unless the container has stdin
	stdinR         *io.PipeReader
	cio            cio.IO
	tty            bool
	stdinOnce      bool
	// stdinCopied is closed when the copy from stdinR into the task's stdin FIFO has ended.
	stdinCopied chan struct{}
	closeOnce   sync.Once
}

func newContainerIO(log *logFile, meta *containerMeta) *containerIO {
	cio := &containerIO{log: log, tty: meta.TTY, stdinOnce: meta.StdinOnce}
	cio.stdout = &streamWriter{log: log, stream: "stdout", fanout: &fanout{}}
	cio.stderr = &streamWriter{log: log, stream: "stderr", fanout: &fanout{}}
	if meta.Stdin {
		cio.stdinR, cio.stdinW = io.Pipe()
		cio.stdinCopied = make(chan struct{})
	}
	return cio
}

// copyBufferSize is the buffer each stdio copy holds while it waits for output. containerd's own copier holds
// 32 KiB per stream for the life of the container (7 MiB at 110 pods); a log line longer than this is still
// recorded whole, over several reads.
const copyBufferSize = 4 << 10

// creator opens the FIFOs of a new task in fifoDir and copies them through this containerIO.
func (c *containerIO) creator(fifoDir string) cio.Creator {
	return func(id string) (cio.IO, error) {
		fifos, err := cio.NewFIFOSetInDir(fifoDir, id, c.tty)
		if err != nil {
			return nil, err
		}
		return c.open(fifos)
	}
}

// attacher reopens the FIFOs of a running task (after a restart of this process) and copies them through
// this containerIO.
func (c *containerIO) attacher() cio.Attach {
	return func(fifos *cio.FIFOSet) (cio.IO, error) {
		if fifos == nil {
			return nil, errors.New("cannot attach: the task has no FIFOs")
		}
		return c.open(fifos)
	}
}

// open opens fifos and starts the copies: stdout and stderr (one stream with a TTY) into the log and attach
// sessions, stdin from the pipe attach sessions write to.
func (c *containerIO) open(fifos *cio.FIFOSet) (cio.IO, error) {
	if c.stdinR == nil {
		fifos.Stdin = ""
	}
	if c.tty {
		fifos.Stderr = ""
	}
	d, err := cio.NewDirectIO(context.Background(), fifos)
	if err != nil {
		return nil, err
	}
	cp := &copyIO{DirectIO: d}
	if d.Stdin != nil {
		go func() {
			buf := make([]byte, copyBufferSize)
			_, _ = io.CopyBuffer(d.Stdin, c.stdinR, buf)
			_ = d.Stdin.Close()
			close(c.stdinCopied)
		}()
	}
	for _, s := range []struct {
		r io.ReadCloser
		w io.Writer
	}{{d.Stdout, c.stdout}, {d.Stderr, c.stderr}} {
		if s.r == nil {
			continue
		}
		cp.wg.Add(1)
		go func() {
			defer cp.wg.Done()
			buf := make([]byte, copyBufferSize)
			_, _ = io.CopyBuffer(onlyWriter{s.w}, onlyReader{s.r}, buf)
			_ = s.r.Close()
		}()
	}
	c.cio = cp
	return cp, nil
}

// closeStdin ends the container's stdin once what was written to it has reached the task's FIFO: the pipe is
// closed, then the shim is told to close the process's stdin (the shim holds the FIFO open for writing
// itself, so closing our end alone never reaches the process), as containerd's CRI plugin does for stdinOnce.
func (c *containerIO) closeStdin(ctx context.Context, t interface {
	CloseIO(context.Context, ...containerd.IOCloserOpts) error
}) {
	c.closeOnce.Do(func() {
		_ = c.stdinW.Close()
		select {
		case <-c.stdinCopied:
		case <-ctx.Done():
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = t.CloseIO(cctx, containerd.WithStdinCloser)
	})
}

// waitOutput waits, at most d, until the copies of the container's output have ended (its FIFOs closed when
// the process exited).
func (c *containerIO) waitOutput(d time.Duration) {
	if c.cio == nil {
		return
	}
	done := make(chan struct{})
	go func() { c.cio.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// copyIO is a task's stdio whose copies this process runs; Wait returns when stdout and stderr are drained.
type copyIO struct {
	*cio.DirectIO
	wg sync.WaitGroup
}

func (c *copyIO) Wait() { c.wg.Wait() }

// onlyReader and onlyWriter hide ReadFrom and WriteTo, so that io.CopyBuffer uses the small buffer it is given.
type onlyReader struct{ io.Reader }
type onlyWriter struct{ io.Writer }

// ioDrainTimeout bounds the wait for a gone task's output to drain.
const ioDrainTimeout = 2 * time.Second

// finishWithin finishes, waiting at most d: a task whose shim still holds the pipes open (a delete that
// failed) must not hold the caller up; the copies then end whenever the pipes close.
func (c *containerIO) finishWithin(d time.Duration) {
	done := make(chan struct{})
	go func() { c.finish(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// finish waits for the copies to drain, then flushes and closes the log.
func (c *containerIO) finish() {
	if c.cio != nil {
		c.cio.Wait()
		_ = c.cio.Close()
	}
	_ = c.stdout.Close()
	_ = c.stderr.Close()
	if c.stdinW != nil {
		_ = c.stdinW.Close()
	}
	c.log.close()
}

// ioRegistry holds the containerIO of each running container this process copies output for.
type ioRegistry struct {
	mu sync.Mutex
	m  map[string]*containerIO
}

func newIORegistry() *ioRegistry { return &ioRegistry{m: map[string]*containerIO{}} }

func (r *ioRegistry) put(id string, c *containerIO) {
	r.mu.Lock()
	r.m[id] = c
	r.mu.Unlock()
}

func (r *ioRegistry) get(id string) *containerIO {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

func (r *ioRegistry) take(id string) *containerIO {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.m[id]
	delete(r.m, id)
	return c
}
