package logd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// Client is the Service of a daemon reached over its socket. When Spawn is set, a daemon that does not
// answer is started (and started again when it goes away): the runtime runs its own, unless a service
// manager runs one on the same socket.
type Client struct {
	Socket string
	// Spawn starts a daemon serving Socket; nil never starts one.
	Spawn func() error
	// SpawnWait is how long a started daemon has to answer; 0 means 10 s.
	SpawnWait time.Duration

	spawnMu sync.Mutex
	stop    chan struct{}
	stopped sync.Once
}

var _ Service = (*Client)(nil)

// SpawnCommand returns a Spawn that runs the daemon binary with args, in a session of its own (the
// kubelet's end, or a signal to its process group, is not the daemon's), with its output appended to
// logFile. The process is reaped while this process lives; after that, by whoever adopts it.
func SpawnCommand(binary string, args []string, logFile string) func() error {
	return func() error {
		out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("container log daemon log: %w", err)
		}
		defer out.Close()
		cmd := exec.Command(binary, args...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start the container log daemon %s: %w", binary, err)
		}
		go func() { _ = cmd.Wait() }() // its exit is seen by the client's hold; this only reaps it
		return nil
	}
}

// dial connects to the daemon, starting one first if none answers and Spawn is set.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err == nil || c.Spawn == nil {
		if err != nil {
			return nil, fmt.Errorf("container log daemon at %s: %w", c.Socket, err)
		}
		return conn, nil
	}
	if err := c.ensure(ctx); err != nil {
		return nil, err
	}
	conn, err = d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return nil, fmt.Errorf("container log daemon at %s: %w", c.Socket, err)
	}
	return conn, nil
}

// ensure starts a daemon unless one answers, and waits until it does. One start at a time; a daemon that
// finds another one holding its lock exits, and the one that holds it answers.
func (c *Client) ensure(ctx context.Context) error {
	c.spawnMu.Lock()
	defer c.spawnMu.Unlock()
	if c.ping(ctx) == nil {
		return nil
	}
	if err := c.Spawn(); err != nil {
		return err
	}
	wait := c.SpawnWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		err := c.ping(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the container log daemon started but does not answer at %s: %w", c.Socket, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Client) ping(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, _, err = exchange(conn, request{Op: opPing})
	return err
}

// exchange sends req on conn and reads the response line, whose error it returns; br is what follows it.
func exchange(conn net.Conn, req request) (*bufio.Reader, response, error) {
	if err := writeLine(conn, req); err != nil {
		return nil, response{}, err
	}
	br := bufio.NewReader(conn)
	var resp response
	if err := readLine(br, &resp); err != nil {
		return nil, resp, fmt.Errorf("container log daemon: %s: %w", req.Op, err)
	}
	return br, resp, resp.err()
}

// call sends a request on a connection of its own and returns the daemon's answer.
func (c *Client) call(ctx context.Context, req request) (response, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return response{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	_, resp, err := exchange(conn, req)
	return resp, err
}

// Open implements Service.
func (c *Client) Open(ctx context.Context, s Spec) error {
	_, err := c.call(ctx, request{Op: opOpen, Spec: &s})
	return err
}

// Reopen implements Service.
func (c *Client) Reopen(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{Op: opReopen, ID: id})
	return err
}

// Drain implements Service.
func (c *Client) Drain(ctx context.Context, id string, timeout time.Duration) error {
	_, err := c.call(ctx, request{Op: opDrain, ID: id, TimeoutMS: timeout.Milliseconds()})
	return err
}

// Close implements Service.
func (c *Client) Close(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{Op: opClose, ID: id})
	return err
}

// Lost implements Service.
func (c *Client) Lost(ctx context.Context) (map[string]int, error) {
	resp, err := c.call(ctx, request{Op: opLost})
	return resp.Lost, err
}

// Attach implements Service.
func (c *Client) Attach(ctx context.Context, id string, stdout, stderr io.Writer, joined func()) error {
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	br, _, err := exchange(conn, request{Op: opAttach, ID: id, Stdout: stdout != nil, Stderr: stderr != nil})
	if err != nil {
		return err
	}
	if joined != nil {
		joined() // the daemon answers once the session receives the output
	}
	var buf []byte
	for {
		kind, p, err := readFrame(br, buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil // the session's caller went away
			}
			return fmt.Errorf("container log daemon: attach: %w", err)
		}
		buf = p[:0]
		var w io.Writer
		switch kind {
		case frameStdout:
			w = stdout
		case frameStderr:
			w = stderr
		case frameEnd:
			var resp response
			if len(p) > 0 {
				if err := json.Unmarshal(p, &resp); err != nil {
					return fmt.Errorf("container log daemon: attach: %w", err)
				}
			}
			return resp.err()
		default:
			return fmt.Errorf("container log daemon: attach: frame of kind %d", kind)
		}
		if w == nil {
			continue
		}
		if _, err := w.Write(p); err != nil {
			return ErrDropped // the session's writer failed: it went away
		}
	}
}

// Watch holds a connection to the daemon until ctx ends, starting the daemon again (when Spawn is set)
// whenever it goes away: a daemon killed by hand or by the OOM killer is back within about a second, and
// goes on from its records. The shim holds the containers' output meanwhile (a container that fills its
// pipe waits).
func (c *Client) Watch(ctx context.Context) {
	logger := klog.FromContext(ctx)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		held := c.hold(ctx)
		if ctx.Err() != nil {
			return
		}
		if held {
			logger.Info("The container log daemon went away; starting it again", "socket", c.Socket)
			backoff = 100 * time.Millisecond
		}
		if c.Spawn != nil {
			if err := c.ensure(ctx); err != nil {
				logger.Error(err, "Starting the container log daemon failed; retrying", "in", backoff)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// hold connects and waits until the connection ends; it reports whether it was connected at all.
func (c *Client) hold(ctx context.Context) bool {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return false
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	br, _, err := exchange(conn, request{Op: opHold})
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, br) // until the daemon goes, or ctx ends
	return true
}

// IsNotFound reports whether err says the daemon does not know the container.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// Ping makes sure a daemon answers, starting one when Spawn is set.
func (c *Client) Ping(ctx context.Context) error {
	if c.Spawn != nil {
		return c.ensure(ctx)
	}
	if err := c.ping(ctx); err != nil {
		return fmt.Errorf("container log daemon at %s: %w", c.Socket, err)
	}
	return nil
}
