package criserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// maxMsgSize is the largest message served or accepted, as CRI clients (the kubelet, crictl) allow.
const maxMsgSize = 16 << 20

// DefaultShutdownTimeout bounds how long Serve waits for in-flight calls once its context is done.
const DefaultShutdownTimeout = 10 * time.Second

var (
	_ runtimeapi.RuntimeServiceServer = (*Server)(nil)
	_ runtimeapi.ImageServiceServer   = (*Server)(nil)
)

// Server serves a CRI runtime and image service over gRPC. Its RPC methods call the Go interfaces it was
// built with and map their errors to gRPC status codes. It is safe for concurrent use; Serve runs once.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	rt              cri.RuntimeService
	img             cri.ImageManagerService
	shutdownTimeout time.Duration

	served   atomic.Bool
	quit     chan struct{} // closed when Serve begins to stop; ends event streams
	quitOnce sync.Once
}

// Option configures a Server.
type Option func(*Server)

// WithShutdownTimeout sets how long Serve waits for in-flight calls to finish before cutting them off.
func WithShutdownTimeout(d time.Duration) Option {
	return func(s *Server) { s.shutdownTimeout = d }
}

// New returns a Server answering CRI calls with rt and img.
func New(rt cri.RuntimeService, img cri.ImageManagerService, opts ...Option) *Server {
	s := &Server{rt: rt, img: img, shutdownTimeout: DefaultShutdownTimeout, quit: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Serve listens on the unix socket at socketPath (mode 0600, replacing a stale socket) and serves until ctx is
// done; then it stops gracefully within the shutdown timeout and removes the socket. It returns nil after a
// shutdown asked for by ctx. It fails if another server answers on socketPath.
func (s *Server) Serve(ctx context.Context, socketPath string) error {
	if !s.served.CompareAndSwap(false, true) {
		return errors.New("criserver: Serve called twice")
	}
	ln, err := Listen(socketPath)
	if err != nil {
		return err
	}
	return s.serve(ctx, ln, socketPath)
}

// Listen binds the CRI socket (mode 0600, owned by root), or says why it cannot: another server listening
// on it is an error, a stale socket file is replaced.
func Listen(socketPath string) (net.Listener, error) { return listenUnix(socketPath) }

// ServeListener is Serve on a socket Listen bound.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener, socketPath string) error {
	if !s.served.CompareAndSwap(false, true) {
		ln.Close()
		return errors.New("criserver: Serve called twice")
	}
	return s.serve(ctx, ln, socketPath)
}

func (s *Server) serve(ctx context.Context, ln net.Listener, socketPath string) error {
	logger := klog.FromContext(ctx)
	defer os.Remove(socketPath)

	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMsgSize), grpc.MaxSendMsgSize(maxMsgSize))
	runtimeapi.RegisterRuntimeServiceServer(srv, s)
	runtimeapi.RegisterImageServiceServer(srv, s)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("Serving CRI", "socket", socketPath)

	select {
	case err := <-serveErr:
		s.stopEvents()
		return fmt.Errorf("serve CRI on %s: %w", socketPath, err)
	case <-ctx.Done():
	}
	s.stopEvents()
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	timer := time.NewTimer(s.shutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		logger.Info("CRI calls still running at shutdown; closing them", "timeout", s.shutdownTimeout)
		srv.Stop()
		<-stopped
	}
	logger.Info("Stopped serving CRI", "socket", socketPath)
	return nil
}

func (s *Server) stopEvents() { s.quitOnce.Do(func() { close(s.quit) }) }

// listenUnix listens on path after removing a stale socket there. The socket is only ever reachable at path
// as its owner's alone (0600, root's): it is bound in a private directory, restricted there, and then
// renamed into place, so there is no moment where it has the mode the process's umask would give it.
func listenUnix(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	private, err := os.MkdirTemp(dir, ".socket-") // mode 0700
	if err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	defer os.RemoveAll(private)
	bound := filepath.Join(private, "sock")
	ln, err := net.Listen("unix", bound)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		ln.Close()
		return nil, fmt.Errorf("restrict %s: %w", path, err)
	}
	if err := os.Chmod(bound, 0o600); err != nil {
		return fail(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(bound, 0, 0); err != nil {
			return fail(err)
		}
	}
	if err := os.Rename(bound, path); err != nil {
		return fail(err)
	}
	return &unlinkOnClose{Listener: ln, path: path}, nil
}

// unlinkOnClose removes the socket's path when the listener closes.
type unlinkOnClose struct {
	net.Listener
	path string
	once sync.Once
}

func (l *unlinkOnClose) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { _ = os.Remove(l.path) })
	return err
}

// removeStaleSocket removes a socket nobody answers on; it refuses to touch anything else.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s: another server is listening", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}
