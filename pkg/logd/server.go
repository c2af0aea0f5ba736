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
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Version is the daemon's protocol version, answered to a ping.
const Version = "1"

// Server serves a Daemon on a unix socket.
type Server struct {
	Daemon *Daemon
	// IdleExit ends Serve once no container has been copied for and no client connected for this long; 0
	// serves until ctx ends (a daemon run by systemd).
	IdleExit time.Duration
	// TidyInterval is how often logs whose file is gone are reopened; 0 means 10 s.
	TidyInterval time.Duration

	conns atomic.Int64
	wg    sync.WaitGroup
}

// Listen makes the socket's directory (root only) and listens on path, replacing a stale socket. The lock
// held by the caller (LockDir) is what keeps two daemons apart, not the socket.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// Lock takes an exclusive lock on <dir>/lock, so that one daemon serves a state directory; a second gets an
// error at once.
func Lock(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("another container log daemon serves %s: %w", dir, err)
	}
	return f, nil
}

// Serve accepts connections until ctx ends or the daemon has been idle for IdleExit, then stops the copies
// (keeping their records) and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		_ = ln.Close() // ends Accept
	}()
	go s.housekeep(ctx, cancel)
	var err error
	for {
		conn, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = aerr
			}
			break
		}
		s.conns.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.conns.Add(-1)
			defer conn.Close()
			s.serveConn(ctx, conn)
		}()
	}
	cancel()
	s.wg.Wait()
	s.Daemon.Shutdown()
	return err
}

// housekeep tidies the daemon's logs, and ends the server after IdleExit without work.
func (s *Server) housekeep(ctx context.Context, stop func()) {
	interval := s.TidyInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastTidy, idleSince := time.Now(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if now.Sub(lastTidy) >= interval {
				s.Daemon.Tidy(ctx, 10*time.Minute)
				lastTidy = now
			}
			if s.conns.Load() > 0 || s.Daemon.Running() > 0 {
				idleSince = now
			} else if s.IdleExit > 0 && now.Sub(idleSince) >= s.IdleExit {
				klog.FromContext(ctx).Info("No container output to copy and no client: exiting", "idle", s.IdleExit)
				stop()
				return
			}
		}
	}
}

// serveConn answers one request. Only root, or the daemon's own user, may ask.
func (s *Server) serveConn(ctx context.Context, conn net.Conn) {
	if err := checkPeer(conn); err != nil {
		_ = writeLine(conn, responseOf(err)) // the caller is refused either way
		return
	}
	r := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var req request
	if err := readLine(r, &req); err != nil {
		_ = writeLine(conn, responseOf(fmt.Errorf("bad request: %w", err))) // the caller is refused either way
		return
	}
	_ = conn.SetReadDeadline(time.Time{}) // a unix socket always takes a deadline
	// The request's context ends when the client goes (a read sees EOF) or the server stops.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, r) // a client sends nothing after its request
		cancel()
	}()
	d := s.Daemon
	// A failed write of an answer is the client's going: nothing is left to tell it.
	switch req.Op {
	case opPing:
		_ = writeLine(conn, response{Version: Version}) // a failed write is the client's going
	case opHold:
		if writeLine(conn, response{Version: Version}) == nil {
			<-rctx.Done()
		}
	case opOpen:
		if req.Spec == nil {
			_ = writeLine(conn, responseOf(errors.New("open: no spec")))
			return
		}
		_ = writeLine(conn, responseOf(d.Open(rctx, *req.Spec)))
	case opLost:
		lost, err := d.Lost(rctx)
		resp := responseOf(err)
		resp.Lost = lost
		_ = writeLine(conn, resp)
	case opReopen:
		_ = writeLine(conn, responseOf(d.Reopen(rctx, req.ID)))
	case opDrain:
		_ = writeLine(conn, responseOf(d.Drain(rctx, req.ID, time.Duration(req.TimeoutMS)*time.Millisecond)))
	case opClose:
		_ = writeLine(conn, responseOf(d.Close(rctx, req.ID)))
	case opAttach:
		var mu sync.Mutex
		var stdout, stderr io.Writer
		if req.Stdout {
			stdout = frameWriter{mu: &mu, w: conn, kind: frameStdout}
		}
		if req.Stderr {
			stderr = frameWriter{mu: &mu, w: conn, kind: frameStderr}
		}
		// The answer line goes out once the session receives the output and before any frame of it: the
		// frames wait on mu, held until then. The client forwards its input only after that line.
		mu.Lock()
		joined := false
		err := d.Attach(rctx, req.ID, stdout, stderr, func() {
			joined = true
			_ = writeLine(conn, response{}) // a client gone ends the session through rctx
			mu.Unlock()
		})
		if !joined {
			mu.Unlock()
			_ = writeLine(conn, responseOf(err))
			return
		}
		b, _ := json.Marshal(responseOf(err)) // a response always marshals
		mu.Lock()
		_ = writeFrame(conn, frameEnd, b) // a client gone has nothing to read it
		mu.Unlock()
	default:
		_ = writeLine(conn, responseOf(fmt.Errorf("unknown op %q", req.Op)))
	}
}

// checkPeer refuses a caller that is neither root nor the daemon's own user (the socket's mode already
// does, unless it was changed).
func checkPeer(conn net.Conn) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("uid %d may not use the container log daemon", cred.Uid)
	}
	return nil
}

// DefaultDir holds each containerd namespace's daemon socket and state.
const DefaultDir = "/run/nodeagent/logd"

// DefaultSocket is the socket of the daemon serving a containerd namespace's containers.
func DefaultSocket(dir, namespace string) string { return filepath.Join(dir, namespace+".sock") }

// DefaultStateDir is where that daemon records its containers. Under /run: FIFOs do not outlive a boot,
// and neither do the records of their copies.
func DefaultStateDir(dir, namespace string) string { return filepath.Join(dir, namespace) }
