package runtime

import (
	"io"
	"sync"

	"github.com/containerd/containerd/cio"
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
}

func newContainerIO(log *logFile, meta *containerMeta) *containerIO {
	cio := &containerIO{log: log, tty: meta.TTY, stdinOnce: meta.StdinOnce}
	cio.stdout = &streamWriter{log: log, stream: "stdout", fanout: &fanout{}}
	cio.stderr = &streamWriter{log: log, stream: "stderr", fanout: &fanout{}}
	if meta.Stdin {
		cio.stdinR, cio.stdinW = io.Pipe()
	}
	return cio
}

// streamOpts are the cio options that route the container's stdio through this containerIO.
func (c *containerIO) streamOpts(fifoDir string) []cio.Opt {
	var stdin io.Reader
	if c.stdinR != nil {
		stdin = c.stdinR
	}
	opts := []cio.Opt{cio.WithStreams(stdin, c.stdout, c.stderr), cio.WithFIFODir(fifoDir)}
	if c.tty {
		opts = append(opts, cio.WithTerminal)
	}
	return opts
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
