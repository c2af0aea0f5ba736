package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/nodedefaults"
)

// Check is one input of /healthz: Func returns nil when healthy. It must be fast and safe for concurrent use.
type Check struct {
	Name string
	Func func() error
}

// PodLookup finds a pod the node runs by namespace and name, with its latest status; the pod must not be
// modified. For a static pod it returns the pod as the kubelet runs it (whose UID names its log directory).
type PodLookup func(namespace, name string) (*v1.Pod, bool)

// Config configures a Server. Addr, NodeName, ClientCA, AccessReviews and Pods are required.
type Config struct {
	// Addr is the HTTPS address, host:port (port 0 picks a free one); upstream's port is 10250.
	Addr string
	// HealthzAddr is the plain-HTTP /healthz address, e.g. 127.0.0.1:10248; empty serves none.
	HealthzAddr string
	// TLSCertFile and TLSKeyFile are the serving pair; when empty a self-signed pair is kept in
	// RootDir/pki/kubelet.crt and kubelet.key, made for Hostnames (names and addresses).
	TLSCertFile, TLSKeyFile string
	RootDir                 string
	Hostnames               []string
	// ClientCA is the PEM bundle of the CAs whose client certificates authenticate callers; empty: client
	// certificates are not asked for nor accepted (upstream's kubelet without --client-ca-file), and callers
	// authenticate with bearer tokens only.
	ClientCA []byte
	// TokenReviews authenticates bearer tokens through the API server; nil refuses them.
	TokenReviews TokenReviewer
	// AccessReviews authorizes every request but /healthz through the API server.
	AccessReviews AccessReviewer
	// NodeName is the name of the node this endpoint serves: authorization asks about nodes/<NodeName>.
	NodeName string
	// LogsDir holds the pods' logs (/var/log/pods).
	LogsDir string
	// Pods finds pods by namespace and name.
	Pods PodLookup
	// Resolver and Streaming serve /exec, /attach and /portForward; those answer 501 without them. A
	// runtime that streams from a server of its own is reached through StreamURLs instead of Streaming.
	Resolver   Resolver
	Streaming  StreamingRuntime
	StreamURLs URLStreamer
	// Checks decide /healthz.
	Checks []Check
	// Clock is the time source; the real clock when nil.
	Clock clock.Clock
	// StreamIdleTimeout and StreamCreationTimeout bound streaming sessions (4h and 30s when 0).
	StreamIdleTimeout, StreamCreationTimeout time.Duration
	// Limits bound requests in flight and their duration.
	Limits Limits
	// Status is what /stats/summary, /metrics..., /pods, /runningpods/, /configz and /logs/ serve.
	Status StatusSources
}

// Server is the kubelet's endpoint: /healthz on plain HTTP, and on HTTPS /healthz, /containerLogs, /exec,
// /attach, /portForward and /debug/pprof, every path but /healthz for callers that are authenticated (client
// certificate or bearer token) and authorized by the API server. It is safe for concurrent use.
type Server struct {
	cfg       Config
	authn     *authenticator
	authz     *authorizer
	cert      tls.Certificate
	limiter   *limiter
	mux       *http.ServeMux
	secure    *http.Server
	plain     *http.Server
	secureLn  net.Listener
	plainLn   net.Listener
	done      sync.WaitGroup
	closeOnce sync.Once
	stopped   chan struct{}
}

// New checks the configuration and loads (or makes) the serving certificate; Start listens.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Addr == "":
		return nil, errors.New("server: the HTTPS address is required")
	case len(cfg.ClientCA) == 0 && cfg.TokenReviews == nil:
		return nil, errors.New("server: a client CA bundle or a token reviewer is required to authenticate callers")
	case cfg.AccessReviews == nil:
		return nil, errors.New("server: an access reviewer is required to authorize callers")
	case cfg.NodeName == "":
		return nil, errors.New("server: the node name is required to authorize callers")
	case cfg.Pods == nil:
		return nil, errors.New("server: a pod lookup is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.LogsDir == "" {
		cfg.LogsDir = nodedefaults.PodLogsDir
	}
	if cfg.RootDir == "" {
		cfg.RootDir = nodedefaults.RootDir
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = 4 * time.Hour
	}
	if cfg.StreamCreationTimeout <= 0 {
		cfg.StreamCreationTimeout = 30 * time.Second
	}
	var roots *x509.CertPool
	if len(cfg.ClientCA) > 0 {
		pool, err := caPool(cfg.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		roots = pool
	}
	hosts := append([]string(nil), cfg.Hostnames...)
	if len(hosts) == 0 {
		if h, err := os.Hostname(); err == nil {
			hosts = append(hosts, strings.ToLower(h))
		}
	}
	hosts = append(hosts, "localhost", "127.0.0.1", "::1")
	cert, err := servingCertificate(cfg.TLSCertFile, cfg.TLSKeyFile, filepath.Join(cfg.RootDir, "pki"), hosts, cfg.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{cfg: cfg, cert: cert, mux: http.NewServeMux(), stopped: make(chan struct{}),
		authn: newAuthenticator(roots, cfg.TokenReviews, cfg.Clock),
		authz: newAuthorizer(cfg.AccessReviews, cfg.NodeName, cfg.Clock), limiter: newLimiter(cfg.Limits)}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", s.serveHealthz)
	s.mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.serveContainerLogs)
	for _, m := range []string{"GET", "POST"} {
		s.mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", s.serveExec)
		s.mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", s.serveExec)
		s.mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", s.serveAttach)
		s.mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", s.serveAttach)
		s.mux.HandleFunc(m+" /portForward/{namespace}/{pod}", s.servePortForward)
		s.mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", s.servePortForward)
	}
	s.statusRoutes()
	// Go's profiles, as upstream's enableProfilingHandler serves them: go tool pprof reaches them through
	// the API server's node proxy (/api/v1/nodes/NODE/proxy/debug/pprof/heap).
	s.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	s.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// Start listens on the HTTPS address (and the healthz address when set) and serves in the background until
// Stop or ctx ends. A port that cannot be bound is an error.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	s.secureLn = ln
	if s.cfg.HealthzAddr != "" {
		if s.plainLn, err = net.Listen("tcp", s.cfg.HealthzAddr); err != nil {
			_ = ln.Close()
			return fmt.Errorf("listen on %s: %w", s.cfg.HealthzAddr, err)
		}
	}
	logger := klog.FromContext(ctx)
	base := func(net.Listener) context.Context { return klog.NewContext(context.Background(), logger) }
	// The limiter comes first: callers beyond the in-flight bounds are refused before they cost a review.
	// Client certificates are asked for only when a client CA can verify them.
	clientAuth := tls.RequestClientCert
	if s.authn.roots == nil {
		clientAuth = tls.NoClientCert
	}
	s.secure = &http.Server{Handler: s.limiter.wrap(http.HandlerFunc(s.serveSecure)),
		ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		BaseContext: base, TLSConfig: &tls.Config{Certificates: []tls.Certificate{s.cert},
			ClientAuth: clientAuth, MinVersion: tls.VersionTLS12}}
	s.serve(ctx, "HTTPS", func() error { return s.secure.ServeTLS(ln, "", "") })
	if s.plainLn != nil {
		plain := http.NewServeMux()
		plain.HandleFunc("GET /healthz", s.serveHealthz)
		s.plain = &http.Server{Handler: s.limiter.wrap(plain), ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes, BaseContext: base}
		s.serve(ctx, "healthz", func() error { return s.plain.Serve(s.plainLn) })
	}
	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-s.stopped:
		}
	}()
	logger.Info("Serving the kubelet endpoint", "address", ln.Addr().String(), "healthz", s.HealthzAddr())
	return nil
}

func (s *Server) serve(ctx context.Context, what string, fn func() error) {
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		if err := fn(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Kubelet endpoint stopped serving", "listener", what)
		}
	}()
}

// Run starts the server and serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	s.Stop()
	return nil
}

// Stop closes the listeners and open connections, and waits for the serving goroutines.
func (s *Server) Stop() {
	s.closeOnce.Do(func() {
		close(s.stopped)
		for _, srv := range []*http.Server{s.secure, s.plain} {
			if srv != nil {
				_ = srv.Close()
			}
		}
		s.done.Wait()
	})
}

// Addr returns the HTTPS address served, once started.
func (s *Server) Addr() string {
	if s.secureLn == nil {
		return ""
	}
	return s.secureLn.Addr().String()
}

// HealthzAddr returns the plain-HTTP healthz address served, once started; empty when none.
func (s *Server) HealthzAddr() string {
	if s.plainLn == nil {
		return ""
	}
	return s.plainLn.Addr().String()
}

// CertPEM returns the serving certificate (its first certificate), for callers that pin it.
func (s *Server) CertPEM() []byte {
	if len(s.cert.Certificate) == 0 {
		return nil
	}
	return pemCert(s.cert.Certificate[0])
}

// serveSecure authenticates and authorizes the caller, then dispatches; /healthz alone is open to anyone.
// Unauthenticated callers get 401, unauthorized ones 403, and a review the API server could not answer 500,
// worded as upstream's kubelet words them.
func (s *Server) serveSecure(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == healthzPath {
		s.mux.ServeHTTP(w, r)
		return
	}
	logger := klog.FromContext(r.Context())
	u, err := s.authn.authenticate(r)
	if errors.Is(err, errTooManyReviews) {
		logger.V(2).Info("Refused a request: token reviews at their bound", "path", r.URL.Path, "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
		return
	}
	if err != nil {
		logger.V(2).Info("Refused unauthenticated request", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err.Error())
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	verb, subresources := requestAttributes(r.Method, r.URL.Path)
	for _, sub := range subresources {
		allowed, _, err := s.authz.authorize(r.Context(), u, verb, sub)
		if err != nil {
			logger.Error(err, "Authorization error", "user", u.name, "verb", verb, "resource", "nodes", "subresource", sub)
			http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", u.name, verb, sub),
				http.StatusInternalServerError)
			return
		}
		if allowed {
			s.mux.ServeHTTP(w, r)
			return
		}
	}
	logger.V(2).Info("Forbidden", "user", u.name, "verb", verb, "resource", "nodes", "subresources", subresources)
	http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.name, verb, subresources),
		http.StatusForbidden)
}

// serveHealthz answers "ok" when every check passes, else 500 naming the failed checks; ?verbose lists all.
func (s *Server) serveHealthz(w http.ResponseWriter, r *http.Request) {
	body, ok := healthz(s.cfg.Checks, r.URL.Query().Has("verbose"))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !ok {
		klog.FromContext(r.Context()).V(2).Info("Health check failed", "report", body)
		w.WriteHeader(http.StatusInternalServerError)
	}
	_, _ = w.Write([]byte(body))
}

// healthz runs the checks and words the answer as upstream's healthz does.
func healthz(checks []Check, verbose bool) (string, bool) {
	var b strings.Builder
	ok := true
	for _, c := range checks {
		if c.Func == nil {
			continue
		}
		if err := c.Func(); err != nil {
			ok = false
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
		}
	}
	switch {
	case !ok:
		return b.String() + "healthz check failed\n", false
	case verbose:
		return b.String() + "healthz check passed\n", true
	}
	return "ok", true
}

// writeError answers with err's HTTP status (500 unless it carries one) and its text.
func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var he *httpError
	if errors.As(err, &he) {
		code = he.code
	}
	http.Error(w, err.Error(), code)
}
