package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/apiserver/admission"
	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
	"github.com/nodeagent/kubelet/pkg/apiserver/discovery"
	"github.com/nodeagent/kubelet/pkg/apiserver/openapi"
	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/resourcemetrics"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// Server is a running (or ready to run) lightweight apiserver.
type Server struct {
	cfg    Config
	reg    *registry.Registry
	store  *storage.Store
	ca     *auth.CA
	rootCA []byte // published as kube-root-ca.crt
	// serviceCIDR holds the Services' cluster IPs; its first is the kubernetes Service's.
	serviceCIDR netip.Prefix
	authn       *auth.Authenticator
	authz       *auth.Authorizer
	// serviceAccounts issues and authenticates service account tokens.
	serviceAccounts *auth.ServiceAccounts
	rest            *rest.Handler
	discovery       *discovery.Handler
	openapi         *openapi.Handler
	// metrics serves metrics.k8s.io from the kubelets' /metrics/resource.
	metrics  *resourcemetrics.Scraper
	listener net.Listener
	port     int32 // the port it listens on
	http     *http.Server
	url      string
	inFlight *inFlight

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// New opens the data directory (store and PKI) and binds the listening
// socket; the server serves once Start is called.
func New(cfg Config) (s *Server, retErr error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	// Keys this server generated in its data directory are its own: an older version may have left them
	// readable by others.
	for _, key := range []string{cfg.CAKeyFile, cfg.TLSKeyFile, cfg.ServiceAccountSigningKeyFile} {
		if within(cfg.DataDir, key) {
			if _, err := auth.RestrictFile(key); err != nil {
				return nil, err
			}
		}
	}
	now := cfg.Clock.Now()
	ca, err := auth.LoadOrCreateCA(cfg.CACertFile, cfg.CAKeyFile, now)
	if err != nil {
		return nil, err
	}
	cidr, err := admission.ParseServiceCIDR(cfg.ServiceClusterIPRange)
	if err != nil {
		return nil, err
	}
	// Pods reach the server as the kubernetes Service: its names and address are the certificate's too.
	hosts := append([]string{"localhost", "127.0.0.1", "::1", cfg.BindAddress, admission.FirstServiceIP(cidr).String(),
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, cfg.ServingHosts...)
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	serving, err := auth.LoadOrCreateServing(ca, cfg.TLSCertFile, cfg.TLSKeyFile, hosts, now)
	if err != nil {
		return nil, err
	}
	saKey, err := auth.LoadOrCreateSigningKey(cfg.ServiceAccountSigningKeyFile)
	if err != nil {
		return nil, err
	}
	rootCA := ca.CertPEM
	if cfg.RootCAFile != "" {
		if rootCA, err = os.ReadFile(cfg.RootCAFile); err != nil {
			return nil, fmt.Errorf("read root CA file: %w", err)
		}
	}
	var tokens auth.Tokens
	if cfg.TokenFile != "" {
		static, err := auth.LoadTokenFile(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, auth.AudienceAgnostic{Implicit: cfg.APIAudiences, Tokens: static})
	}
	reg := registry.New()
	store, err := storage.Open(filepath.Join(cfg.DataDir, "state.db"), reg.Codec(),
		storage.Options{Window: cfg.EventWindow, FailCommit: cfg.commitHook, Now: cfg.Clock.Now})
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			_ = store.Close()
		}
	}()
	objs := objectIndex{store: store, codec: reg.Codec()}
	s = &Server{cfg: cfg, reg: reg, store: store, ca: ca, rootCA: rootCA,
		discovery: discovery.New(reg, resourcemetrics.Discovery()), openapi: openapi.New(reg, discovery.GitVersion), done: make(chan struct{}),
		inFlight: newInFlight(cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight, cfg.MaxLongRunningRequestsInFlight)}
	s.serviceAccounts = auth.NewServiceAccounts(saKey, cfg.ServiceAccountIssuer, cfg.APIAudiences, objs, cfg.Clock)
	tokens = append(tokens, s.serviceAccounts)
	s.authn = auth.NewAuthenticator(tokens, cfg.APIAudiences)
	s.authz = auth.NewAuthorizer(objs)
	nodes, err := newNodeProxy(store, ca, &cfg)
	if err != nil {
		return nil, err
	}
	s.serviceCIDR = cidr
	s.metrics = newResourceMetrics(objs, nodes)
	mutate := admission.Mutators{admission.NewServiceAccount(objs, cfg.Clock),
		admission.NewServices(cidr, admission.DefaultNodePorts, objs), admission.DRAAdminAccess{Namespaces: objs}}
	s.rest = rest.NewHandler(reg, store, rest.Options{Clock: cfg.Clock, Admit: auth.NodeRestriction{Pods: objs, Storage: objs}, Mutate: mutate,
		BookmarkInterval: cfg.BookmarkInterval, Proxy: nodes,
		Reviewer: auth.Reviewer{Tokens: tokens, Audiences: cfg.APIAudiences, Authorizer: s.authz},
		Tokens: &rest.TokenOptions{Issuer: s.serviceAccounts, Audiences: cfg.APIAudiences,
			MaxExpiration: cfg.ServiceAccountMaxTokenExpiration}})
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.listener = tls.NewListener(ln, &tls.Config{
		Certificates: []tls.Certificate{serving},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	})
	s.url = "https://" + ln.Addr().String()
	s.port = int32(ln.Addr().(*net.TCPAddr).Port)
	if err := s.bootstrap(context.Background()); err != nil {
		_ = ln.Close()
		return nil, err
	}
	// Read and write timeouts are set per request (see ServeHTTP): watches and streams have none.
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: cfg.ReadHeaderTimeout, IdleTimeout: cfg.IdleTimeout,
		MaxHeaderBytes: 1 << 20, BaseContext: func(net.Listener) context.Context { return context.Background() }}
	return s, nil
}

// within reports whether path lies inside dir.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// URL returns the server's https URL.
func (s *Server) URL() string { return s.url }

// CACertPEM returns the CA certificate clients should trust.
func (s *Server) CACertPEM() []byte { return s.ca.CertPEM }

// Start serves in the background and starts the control loops.
func (s *Server) Start(ctx context.Context) error {
	ctx, s.cancel = context.WithCancel(ctx)
	go func() {
		defer close(s.done)
		if err := s.http.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "API server stopped serving")
		}
	}()
	return s.startControllers(ctx)
}

// Run serves until ctx ends, then stops.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return s.Stop()
}

// Stop ends serving, the control loops and the store. Acknowledged writes are
// on disk when it returns.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if herr := s.http.Shutdown(shutdownCtx); herr != nil {
			_ = s.http.Close()
		}
		if s.cancel == nil {
			_ = s.listener.Close()
		} else {
			<-s.done
		}
		err = s.store.Close()
	})
	return err
}

// ServeHTTP authenticates, limits, authorizes and dispatches a request. A
// request that is not a watch or stream gets read and write deadlines and
// the request timeout; every request but the health checks' and admins'
// counts against the in-flight limit of its class.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, err := s.authn.Authenticate(r)
	if errors.Is(err, auth.ErrNoCredentials) && isPublicPath(r) {
		u, err = auth.Anonymous(), nil
	}
	if err != nil {
		rest.WriteError(w, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	info := request.Parse(r)
	class := classify(&info)
	if !u.InGroup(auth.GroupMasters) && !isHealthPath(r.URL.Path) {
		release, ok := s.inFlight.acquire(class)
		if !ok {
			rest.WriteError(w, tooManyRequests())
			return
		}
		defer release()
	}
	if err := s.authz.Authorize(u, &info); err != nil {
		gr := schema.GroupResource{Group: info.Group, Resource: info.Resource}
		rest.WriteError(w, apierrors.NewForbidden(gr, info.ObjectName, err))
		return
	}
	r = r.WithContext(request.WithInfo(request.WithUser(r.Context(), u), &info))
	if class == longRunning {
		s.dispatch(w, r, &info) // no deadlines (net/http clears a connection's after each request)
		return
	}
	timeout, err := requestTimeout(r, s.cfg.RequestTimeout)
	if err != nil {
		rest.WriteError(w, err)
		return
	}
	now := time.Now()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(now.Add(s.cfg.ReadTimeout))
	_ = rc.SetWriteDeadline(now.Add(s.cfg.WriteTimeout))
	serveWithTimeout(w, r, timeout, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.dispatch(w, r, &info) }))
}

// dispatch serves an authorized request.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, info *request.Info) {
	switch p := r.URL.Path; {
	case isHealthPath(p):
		serveHealth(w, r, s.healthChecks(), !request.UserFrom(r.Context()).InGroup(auth.GroupUnauthenticated))
	case p == SnapshotPath:
		s.serveSnapshot(w, r)
	case s.discovery.Serves(p) && !info.IsResource:
		s.discovery.ServeHTTP(w, r)
	case s.openapi.Serves(p):
		s.openapi.ServeHTTP(w, r)
	case info.IsResource && info.Group == resourcemetrics.Group:
		s.serveResourceMetrics(w, r, info)
	case info.IsResource:
		s.rest.ServeHTTP(w, r)
	default:
		rest.WriteError(w, apierrors.NewNotFound(schema.GroupResource{}, p))
	}
}
