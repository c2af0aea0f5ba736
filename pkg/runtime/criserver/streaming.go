package criserver

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"

	"k8s.io/klog/v2"
	"k8s.io/kubelet/pkg/cri/streaming"

	"github.com/nodeagent/kubelet/pkg/runtime"
)

// DefaultStreamAddr is where the streaming server listens by default: loopback, on a free port.
const DefaultStreamAddr = "127.0.0.1:0"

// StreamServer serves the CRI streaming URLs (exec, attach, port-forward) of a runtime over HTTP, with the
// SPDY and WebSocket protocols of k8s.io/kubelet/pkg/cri/streaming. Start and Stop may each be called once.
type StreamServer struct {
	addr    string
	runtime streaming.Runtime
	// publish hands the running server (nil once stopped) to the runtime, whose Exec, Attach and PortForward
	// calls then answer with its URLs.
	publish func(streaming.Server)

	mu   sync.Mutex
	http *http.Server
	url  string
}

// NewStreamServer returns a streaming server for rt that will listen on addr ("" means DefaultStreamAddr).
// Start sets it on rt.
func NewStreamServer(rt *runtime.Runtime, addr string) *StreamServer {
	return newStreamServer(rt.Streamer(), func(s streaming.Server) { rt.SetStreamServer(s) }, addr)
}

func newStreamServer(rt streaming.Runtime, publish func(streaming.Server), addr string) *StreamServer {
	if addr == "" {
		addr = DefaultStreamAddr
	}
	return &StreamServer{addr: addr, runtime: rt, publish: publish}
}

// Start listens, serves in the background, and sets the server on the runtime. The URLs it hands out name the
// address actually bound.
func (s *StreamServer) Start() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen for CRI streaming on %s: %w", s.addr, err)
	}
	base := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	cfg := streaming.DefaultConfig
	cfg.Addr, cfg.BaseURL = base.Host, base
	srv, err := streaming.NewServer(cfg, s.runtime)
	if err != nil {
		ln.Close()
		return fmt.Errorf("create CRI streaming server: %w", err)
	}
	hs := &http.Server{Handler: srv}
	s.mu.Lock()
	s.http, s.url = hs, base.String()
	s.mu.Unlock()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Background().Error(err, "CRI streaming server stopped", "addr", base.Host)
		}
	}()
	s.publish(srv)
	return nil
}

// URL is the server's base URL once started ("" before).
func (s *StreamServer) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Stop unsets the server from the runtime and closes its listener and idle connections. Sessions already
// upgraded to a stream run until they end.
func (s *StreamServer) Stop() error {
	s.publish(nil)
	s.mu.Lock()
	hs := s.http
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.Close()
}
