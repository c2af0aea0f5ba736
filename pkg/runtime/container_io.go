package runtime

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/fifo"

	"github.com/nodeagent/kubelet/pkg/logd"
)

// A container's output goes through FIFOs to the container log daemon (pkg/logd), which writes its CRI log
// and serves attach sessions: the output does not depend on this process being up. The runtime keeps only
// the container's stdin, for attach sessions to write to.

// containerIO is what the runtime holds of a running container's stdio: its stdin FIFO, when the container
// keeps stdin open.
type containerIO struct {
	id        string
	tty       bool
	stdinOnce bool
	stdin     io.WriteCloser // nil unless the container has stdin
	closeOnce sync.Once
	// spec is the container's output as the log daemon copies it.
	spec logd.Spec
}

func (r *Runtime) newContainerIO(id string, meta *containerMeta) *containerIO {
	return &containerIO{id: id, tty: meta.TTY, stdinOnce: meta.StdinOnce,
		spec: logd.Spec{ID: id, LogPath: meta.LogPath, MaxSize: r.cfg.LogMaxSize, MaxFiles: r.cfg.LogMaxFiles}}
}

// creator makes the FIFOs of a new task in fifoDir, has the log daemon open their read ends, and opens the
// stdin FIFO's write end.
func (r *Runtime) creator(c *containerIO, withStdin bool, fifoDir string) cio.Creator {
	return func(id string) (cio.IO, error) {
		fifos, err := cio.NewFIFOSetInDir(fifoDir, id, c.tty)
		if err != nil {
			return nil, err
		}
		if !withStdin {
			fifos.Stdin = ""
		}
		if c.tty {
			fifos.Stderr = ""
		}
		return r.openIO(context.Background(), c, fifos)
	}
}

// attacher opens a running task's FIFOs again (after a restart of this process): the log daemon is asked to
// open the output (it answers at once when it still copies it), and stdin is reopened here.
func (r *Runtime) attacher(c *containerIO, withStdin bool) cio.Attach {
	return func(fifos *cio.FIFOSet) (cio.IO, error) {
		if fifos == nil {
			return nil, errors.New("cannot attach: the task has no FIFOs")
		}
		if !withStdin {
			fifos.Stdin = ""
		}
		return r.openIO(context.Background(), c, fifos)
	}
}

func (r *Runtime) openIO(ctx context.Context, c *containerIO, fifos *cio.FIFOSet) (cio.IO, error) {
	c.spec.Stdout, c.spec.Stderr = fifos.Stdout, fifos.Stderr
	if err := r.logs.Open(ctx, c.spec); err != nil {
		return nil, err
	}
	if fifos.Stdin != "" {
		// Opened without waiting for the reader: the shim opens its end when the task is created.
		w, err := fifo.OpenFifo(context.WithoutCancel(ctx), fifos.Stdin, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o700)
		if err != nil {
			r.closeLogs(ctx, c.id)
			return nil, err
		}
		c.stdin = w
	}
	return &taskIO{cfg: fifos.Config, c: c, r: r}, nil
}

// closeLogs tells the log daemon to stop copying a container's output; a failure is logged (the daemon
// forgets a container whose output ended by itself, after a while).
func (r *Runtime) closeLogs(ctx context.Context, id string) {
	cctx, cancel := r.cleanupContext(ctx)
	defer cancel()
	if err := r.logs.Close(cctx, id); err != nil {
		logger(ctx).Error(err, "Closing a container's log copy failed", "id", id)
	}
}

// taskIO is the cio.IO a task is created or loaded with: its FIFOs' paths, the copies being the daemon's.
type taskIO struct {
	cfg cio.Config
	c   *containerIO
	r   *Runtime
}

func (t *taskIO) Config() cio.Config { return t.cfg }
func (t *taskIO) Cancel()            {}
func (t *taskIO) Wait()              {}

// Close undoes the open when the task could not be created.
func (t *taskIO) Close() error {
	t.c.closeStdinFIFO()
	t.r.closeLogs(context.Background(), t.c.id)
	return nil
}

func (c *containerIO) closeStdinFIFO() {
	if c.stdin != nil {
		// A write end: nothing left to flush. The second Close releases the fifo package's O_PATH handle.
		_ = c.stdin.Close()
		_ = c.stdin.Close()
	}
}

// closeStdin ends the container's stdin: the FIFO's write end is closed, then the shim is told to close the
// process's stdin (the shim holds the FIFO open for writing itself, so closing our end alone never reaches
// the process), as containerd's CRI plugin does for stdinOnce.
func (c *containerIO) closeStdin(ctx context.Context, t interface {
	CloseIO(context.Context, ...containerd.IOCloserOpts) error
}) {
	c.closeOnce.Do(func() {
		c.closeStdinFIFO()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := t.CloseIO(cctx, containerd.WithStdinCloser); err != nil {
			logger(ctx).V(2).Info("Closing a container's stdin failed", "id", c.id, "err", err)
		}
	})
}

// ioDrainTimeout bounds the wait for a gone task's output to drain.
const ioDrainTimeout = logd.DrainTimeout

// finishOutput waits (at most ioDrainTimeout) until the log daemon has written the last of a gone task's
// output, then has it forget the container, and closes its stdin.
func (r *Runtime) finishOutput(ctx context.Context, id string) {
	// Called for a container that may not be in the registry (its re-attach failed after a restart): the
	// daemon is told all the same.
	if err := r.logs.Drain(ctx, id, ioDrainTimeout); err != nil {
		logger(ctx).V(2).Info("A container's output did not end in time; its copy is stopped", "id", id, "err", err)
	}
	r.closeLogs(ctx, id)
	if c := r.io.take(id); c != nil {
		c.closeStdinFIFO()
	}
}

// ioRegistry holds the containerIO of each running container this process started or adopted.
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
