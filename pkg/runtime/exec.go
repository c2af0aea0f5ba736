package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// maxExecSyncOutput caps what ExecSync returns of each stream, as other CRI runtimes do.
const maxExecSyncOutput = 16 * 1024 * 1024

// ErrExecTimeout is returned by ExecSync when the command outlives its timeout; the command is killed.
var ErrExecTimeout = errors.New("exec: command timed out")

// ExecSync runs cmd in a running container and returns its output once it exits. A zero timeout waits
// forever. A non-zero exit is not an error: CRI reports it through the returned error's ExitCode.
func (r *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	var stdout, stderr cappedBuffer
	code, err := r.execSync(ctx, containerID, cmd, &stdout, &stderr, timeout)
	if err != nil {
		return stdout.Bytes(), stderr.Bytes(), err
	}
	if code != 0 {
		return stdout.Bytes(), stderr.Bytes(), &ExitError{Code: code}
	}
	return stdout.Bytes(), stderr.Bytes(), nil
}

// ExitError carries the exit code of a command that ran and failed. It is a k8s.io/utils/exec.ExitError, the
// kind the CRI streaming server reports to the client as an exit code.
type ExitError struct{ Code int }

var _ utilexec.ExitError = (*ExitError)(nil)

func (e *ExitError) Error() string {
	return fmt.Sprintf("command terminated with exit code %d", e.Code)
}

// ExitStatus returns the exit code (the shape remotecommand's streaming callers look for).
func (e *ExitError) ExitStatus() int { return e.Code }

// Exited reports that the command ran to its end; with String, it lets the streaming server report the
// exit code to the client.
func (e *ExitError) Exited() bool { return true }

// String is the error text.
func (e *ExitError) String() string { return e.Error() }

type execOptions struct {
	cmd     []string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	tty     bool
	resize  <-chan remotecommand.TerminalSize
	timeout time.Duration
}

// exec runs a process in a container's namespaces and waits for it, returning its exit code.
func (r *Runtime) exec(ctx context.Context, containerID string, o execOptions) (int, error) {
	ctx = r.ns(ctx)
	if len(o.cmd) == 0 {
		return 0, fmt.Errorf("exec in %q: empty command: %w", containerID, errdefs.ErrInvalidArgument)
	}
	rec, err := r.findContainer(ctx, containerID, kindContainer)
	if err != nil {
		return 0, fmt.Errorf("exec in %q: %w", containerID, err)
	}
	cont, err := r.client.LoadContainer(ctx, rec.ID)
	if err != nil {
		return 0, fmt.Errorf("exec in %q: %w", containerID, err)
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("exec in %q: container is not running: %w", containerID, err)
	}
	spec, err := cont.Spec(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec in %q: %w", containerID, err)
	}
	pspec := *spec.Process
	pspec.Args = o.cmd
	pspec.Terminal = o.tty
	execID := newID()[:32]
	// The shim opens every output stream it is given a FIFO for, and one it is not given fails the exec:
	// an output the caller did not ask for is read and dropped.
	if o.stdout == nil {
		o.stdout = io.Discard
	}
	if o.stderr == nil && !o.tty {
		o.stderr = io.Discard
	}
	// The shim keeps the process's stdin open until told to close it: the end of the caller's stdin is
	// passed on (as containerd's CRI plugin does), so that `cat` or `sh < script` ends.
	var stdinEnded chan struct{}
	if o.stdin != nil {
		stdinEnded = make(chan struct{})
		o.stdin = &eofSignal{r: o.stdin, done: stdinEnded}
	}
	streamOpts := []cio.Opt{cio.WithStreams(o.stdin, o.stdout, o.stderr), cio.WithFIFODir(r.fifoDir(rec.ID))}
	if o.tty {
		streamOpts = append(streamOpts, cio.WithTerminal)
	}
	proc, err := task.Exec(ctx, execID, &pspec, cio.NewCreator(streamOpts...))
	if err != nil {
		return 0, fmt.Errorf("exec in %q: %w", containerID, err)
	}
	cctx, cancel := r.cleanupContext(ctx)
	defer cancel()
	defer func() { _, _ = proc.Delete(cctx, containerd.WithProcessKill) }()
	waitCh, err := proc.Wait(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec in %q: %w", containerID, err)
	}
	if err := proc.Start(ctx); err != nil {
		return 0, fmt.Errorf("exec in %q: start: %w", containerID, err)
	}
	if o.resize != nil {
		go func() {
			for size := range o.resize {
				_ = proc.Resize(cctx, uint32(size.Width), uint32(size.Height)) // a size lost: the next one corrects it
			}
		}()
	}
	if stdinEnded != nil {
		exited := make(chan struct{})
		defer close(exited)
		go func() {
			select {
			case <-stdinEnded:
				_ = proc.CloseIO(cctx, containerd.WithStdinCloser) // fails only for a process already gone
			case <-exited:
			}
		}()
	}
	var timer <-chan time.Time
	if o.timeout > 0 {
		t := time.NewTimer(o.timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case st := <-waitCh:
		// Let the output copies drain before the caller reads the buffers.
		if io := proc.IO(); io != nil {
			io.Wait()
		}
		return int(st.ExitCode()), nil
	case <-timer:
		// A process that ended meanwhile cannot be killed: nothing to undo.
		_ = proc.Kill(cctx, unix.SIGKILL)
		<-waitCh
		return 0, fmt.Errorf("exec in %q: %w after %v", containerID, ErrExecTimeout, o.timeout)
	case <-ctx.Done():
		_ = proc.Kill(cctx, unix.SIGKILL) // as above
		return 0, ctx.Err()
	}
}

// eofSignal closes done when its reader reaches its end (once; a read error counts as the end too).
type eofSignal struct {
	r    io.Reader
	done chan struct{}
	once sync.Once
}

func (e *eofSignal) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.done) })
	}
	return n, err
}

// cappedBuffer is a concurrency-safe buffer that keeps at most maxExecSyncOutput bytes.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxExecSyncOutput - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
		} else {
			b.buf.Write(p)
		}
	}
	return len(p), nil
}

func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}
