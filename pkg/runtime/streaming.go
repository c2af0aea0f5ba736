package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/logd"
)

// Streamer runs the interactive calls (exec, attach, port-forward) of a Runtime with Go streams. The kubelet's
// endpoint and the CRI streaming server call it; it implements k8s.io/kubelet/pkg/cri/streaming.Runtime.
type Streamer struct{ r *Runtime }

// Streamer returns the runtime's interactive-call implementation.
func (r *Runtime) Streamer() *Streamer { return &Streamer{r: r} }

// Exec runs cmd in the container with the given streams, resizing its terminal as sizes arrive. A non-zero
// exit is returned as an error with an ExitStatus method.
func (s *Streamer) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	o := execOptions{cmd: cmd, tty: tty, resize: resize}
	if in != nil {
		o.stdin = in
	}
	if out != nil {
		o.stdout = out
	}
	if errw != nil && !tty {
		o.stderr = errw
	}
	code, err := s.r.exec(ctx, containerID, o)
	if err != nil {
		return err
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// Attach joins the container's own stdio: its output from now on, and its stdin when it keeps one open.
func (s *Streamer) Attach(ctx context.Context, containerID string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	ctx = s.r.ns(ctx)
	rec, err := s.r.findContainer(ctx, containerID, kindContainer)
	if err != nil {
		return fmt.Errorf("attach to %q: %w", containerID, err)
	}
	c := s.r.io.get(rec.ID)
	if c == nil {
		return fmt.Errorf("attach to %q: container is not running: %w", containerID, errdefs.ErrFailedPrecondition)
	}
	// The output comes from the log daemon, which copies it; a session that cannot keep up with it is
	// dropped, and the attach ends.
	if c.tty {
		errw = nil
	}
	actx, stopOutput := context.WithCancel(ctx)
	defer stopOutput()
	outputDone := make(chan error, 1)
	// The client's input is forwarded once the session receives the container's output, so that what the
	// container answers to it (a shell's echo) reaches the client: joined is closed then, or when the output
	// session ended without joining.
	joined := make(chan struct{})
	var joinOnce sync.Once
	join := func() { joinOnce.Do(func() { close(joined) }) }
	if out != nil || errw != nil {
		// A nil stream stays a nil io.Writer: the daemon copies only the streams asked for.
		go func() {
			err := s.r.logs.Attach(actx, rec.ID, out, errw, join)
			join()
			outputDone <- err
		}()
	} else {
		join()
	}
	if resize != nil {
		if cont, err := s.r.client.LoadContainer(ctx, rec.ID); err == nil {
			if task, err := cont.Task(ctx, nil); err == nil {
				go func() {
					for size := range resize {
						_ = task.Resize(ctx, uint32(size.Width), uint32(size.Height)) // a size lost: the next one corrects it
					}
				}()
			}
		}
	}
	cont, err := s.r.client.LoadContainer(ctx, rec.ID)
	if err != nil {
		return err
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		return nil
	}
	waitCh, err := task.Wait(ctx)
	if err != nil {
		return err
	}
	stdinDone := make(chan struct{})
	if in != nil && c.stdin != nil {
		go func() {
			defer close(stdinDone)
			select {
			case <-joined:
			case <-ctx.Done():
				return
			}
			_, _ = io.Copy(c.stdin, in) // ends with the client's input, or when the container's stdin closes
			if c.stdinOnce {
				c.closeStdin(ctx, task)
			}
		}()
	}
	dropped := fmt.Errorf("attach to %q ended: the client fell too far behind the container's output, or went away", containerID)
	for {
		select {
		case <-waitCh:
			// The output the container wrote before it exited reaches the session: the daemon ends the
			// session once the output has ended.
			select {
			case <-outputDone:
			case <-time.After(ioDrainTimeout):
			}
			return nil
		case <-ctx.Done():
			return nil // the client went away; the container goes on
		case err := <-outputDone:
			if errors.Is(err, logd.ErrDropped) {
				return dropped
			}
			if err != nil {
				return fmt.Errorf("attach to %q: %w", containerID, err)
			}
			outputDone = nil // the output ended: the container is exiting
		case <-stdinDone:
			// The client's stdin ended: with stdinOnce the container's stdin is closed now. Either way the
			// session goes on until the container exits or the client is gone (its context ends, or writing
			// its output fails), as containerd's CRI plugin keeps it: what the container prints after the
			// end of its input still reaches the client.
			stdinDone = nil
		}
	}
}

// PortForward connects stream to port on the pod's loopback, inside its network namespace.
func (s *Streamer) PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error {
	ctx = s.r.ns(ctx)
	defer stream.Close()
	_, meta, err := s.r.loadSandbox(ctx, podSandboxID)
	if err != nil {
		return fmt.Errorf("port-forward: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	var conn net.Conn
	dial := func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		conn = c
		return err
	}
	if meta.HostNetwork {
		err = dial()
	} else {
		err = cni.DoInNetns(meta.NetnsPath, dial)
	}
	if err != nil {
		return fmt.Errorf("port-forward to %s in pod %s/%s: %w", addr, meta.Metadata.Namespace, meta.Metadata.Name, err)
	}
	defer conn.Close()
	done := make(chan error, 2)
	go func() { _, err := io.Copy(conn, stream); done <- err }()
	go func() { _, err := io.Copy(stream, conn); done <- err }()
	select {
	case err = <-done:
	case <-ctx.Done():
	}
	return nil
}
