package server

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remotecommandserver "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
)

// URLStreamer is a CRI runtime that serves interactive calls from a streaming server of its own: Exec,
// Attach and PortForward return a URL there (containerd's CRI plugin, CRI-O). Its methods have the shape of
// cri.RuntimeService's.
type URLStreamer interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// proxyExec serves /exec through the runtime's streaming server: the runtime gets the request (container,
// command, streams) and answers with a URL, and the caller's upgraded connection is proxied there, as
// upstream's kubelet proxies streams of remote runtimes.
func (s *Server) proxyExec(w http.ResponseWriter, r *http.Request, id string, opts *remotecommandserver.Options) {
	resp, err := s.cfg.StreamURLs.Exec(r.Context(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: r.URL.Query()["command"],
		Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr})
	if err != nil {
		writeError(w, errorf(http.StatusInternalServerError, "exec: %v", err))
		return
	}
	proxyStream(w, r, resp.GetUrl())
}

// proxyAttach serves /attach through the runtime's streaming server.
func (s *Server) proxyAttach(w http.ResponseWriter, r *http.Request, id string, opts *remotecommandserver.Options) {
	resp, err := s.cfg.StreamURLs.Attach(r.Context(), &runtimeapi.AttachRequest{ContainerId: id,
		Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr})
	if err != nil {
		writeError(w, errorf(http.StatusInternalServerError, "attach: %v", err))
		return
	}
	proxyStream(w, r, resp.GetUrl())
}

// proxyPortForward serves /portForward through the runtime's streaming server.
func (s *Server) proxyPortForward(w http.ResponseWriter, r *http.Request, sandboxID string) {
	var ports []int32
	for _, p := range r.URL.Query()["port"] {
		if n, err := strconv.ParseUint(p, 10, 16); err == nil {
			ports = append(ports, int32(n))
		}
	}
	resp, err := s.cfg.StreamURLs.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: ports})
	if err != nil {
		writeError(w, errorf(http.StatusInternalServerError, "port-forward: %v", err))
		return
	}
	proxyStream(w, r, resp.GetUrl())
}

// proxyStream proxies r, an upgrade to SPDY or WebSocket, to the runtime's streaming URL, and the upgraded
// connection both ways once the runtime switches protocols.
func proxyStream(w http.ResponseWriter, r *http.Request, raw string) {
	target, err := url.Parse(raw)
	if err != nil || target.Host == "" {
		writeError(w, errorf(http.StatusInternalServerError, "the runtime's streaming URL %q is not a URL", raw))
		return
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = target.Host
			pr.Out.Header.Del("Authorization")
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, errorf(http.StatusBadGateway, "the runtime's streaming server: %v", err))
		},
	}
	p.ServeHTTP(w, r)
}
