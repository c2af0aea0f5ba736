package apiserver

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/apiserver/admission"
	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
	"github.com/nodeagent/kubelet/pkg/apiserver/nodeipam"
	"github.com/nodeagent/kubelet/pkg/apiserver/nodelifecycle"
)

// DefaultPort is the conventional apiserver port.
const DefaultPort = 6443

// NodeLeaseNS holds the nodes' heartbeat Leases.
const NodeLeaseNS = "kube-node-lease"

// Config configures a Server.
type Config struct {
	// DataDir holds the store (state.db) and, unless given, the PKI (pki/).
	DataDir string
	// BindAddress is the address to listen on; 127.0.0.1 if empty.
	BindAddress string
	// Port to listen on; 0 picks a free port (see Server.URL). Callers wanting
	// the conventional port set DefaultPort.
	Port int
	// TokenFile is an optional static token file (token,user,uid,"groups").
	TokenFile string
	// CACertFile and CAKeyFile name the CA that signs client and serving
	// certificates; generated in DataDir/pki when empty and missing.
	CACertFile, CAKeyFile string
	// TLSCertFile and TLSKeyFile name the serving pair; issued by the CA in
	// DataDir/pki when empty.
	TLSCertFile, TLSKeyFile string
	// ServingHosts are extra names and addresses for a generated serving
	// certificate (localhost, 127.0.0.1 and the bind address are always in).
	ServingHosts []string
	// EventWindow is how many recent changes watches can resume from.
	EventWindow int
	// BookmarkInterval is how often watches asking for bookmarks get one; 1m if 0.
	BookmarkInterval time.Duration
	// KubeletPreferredAddressTypes orders the node address types tried when
	// proxying to a kubelet; DefaultKubeletAddressTypes if empty.
	KubeletPreferredAddressTypes []corev1.NodeAddressType
	// KubeletHosts maps node names to the host the kubelet is reached at, ahead of the node's addresses. A
	// kubelet that embeds this server maps its own node to 127.0.0.1, where its endpoint listens.
	KubeletHosts map[string]string
	// KubeletCAFile verifies kubelets' serving certificates when set; without
	// it they are not verified, as upstream without a kubelet CA.
	KubeletCAFile string
	// EventTTL is how long an event lives after its last write; DefaultEventTTL
	// if 0; events never expire if negative.
	EventTTL time.Duration
	// Clock is the time source; the real clock if nil.
	Clock clock.WithTicker
	// NodeMonitorGracePeriod is how long a node may go without renewing its Lease or posting its status
	// before it is marked Unknown and tainted unreachable (kube-controller-manager's
	// --node-monitor-grace-period); nodelifecycle.DefaultGracePeriod if 0, never if negative.
	NodeMonitorGracePeriod time.Duration
	// ClusterCIDR, when set, is the range nodes' pod CIDRs (spec.podCIDR) are handed out from, in blocks of
	// NodeCIDRMaskSize bits (24 if 0; 64 for an IPv6 range), as kube-controller-manager's --cluster-cidr with
	// --allocate-node-cidrs. Empty: nodes get none.
	ClusterCIDR      string
	NodeCIDRMaskSize int

	// MaxRequestsInFlight bounds the non-mutating requests served at once
	// (DefaultMaxRequestsInFlight if 0); beyond it a request gets 429 with
	// Retry-After. Members of system:masters are not counted, as upstream.
	MaxRequestsInFlight int
	// MaxMutatingRequestsInFlight bounds the mutating requests served at once
	// (DefaultMaxMutatingRequestsInFlight if 0).
	MaxMutatingRequestsInFlight int
	// MaxLongRunningRequestsInFlight bounds the watches and streams (logs,
	// exec, attach, port-forward, node proxy) open at once
	// (DefaultMaxLongRunningRequestsInFlight if 0).
	MaxLongRunningRequestsInFlight int
	// RequestTimeout bounds a request that is not a watch or stream
	// (DefaultRequestTimeout if 0): beyond it, a 504 Status.
	RequestTimeout time.Duration
	// ReadHeaderTimeout bounds the TLS handshake and the reading of a
	// request's headers (DefaultReadHeaderTimeout if 0).
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long
	// (DefaultIdleTimeout if 0).
	IdleTimeout time.Duration
	// ServiceAccountIssuer is the "iss" of the service account tokens the
	// server signs and accepts (kube-apiserver's --service-account-issuer);
	// DefaultServiceAccountIssuer if empty.
	ServiceAccountIssuer string
	// APIAudiences are the server's own audiences (kube-apiserver's
	// --api-audiences): a token sent to the server must be valid for one of
	// them, and a TokenRequest or TokenReview naming none gets them. The
	// issuer alone if empty, as kube-apiserver.
	APIAudiences []string
	// ServiceAccountSigningKeyFile is the PEM private key (RSA of at least
	// 2048 bits, or P-256 ECDSA) that signs service account tokens; generated
	// (P-256, mode 0600) in DataDir/pki when empty and missing.
	ServiceAccountSigningKeyFile string
	// ServiceAccountMaxTokenExpiration is the longest validity a TokenRequest
	// gets; a longer request is shortened, with a warning, as kube-apiserver's
	// --service-account-max-token-expiration. DefaultServiceAccountMaxTokenExpiration if 0.
	ServiceAccountMaxTokenExpiration time.Duration
	// ServiceClusterIPRange is the CIDR Services' cluster IPs are allocated
	// from; its first address is the kubernetes Service's.
	// DefaultServiceClusterIPRange if empty.
	ServiceClusterIPRange string
	// RootCAFile is the CA bundle published in every namespace as the
	// kube-root-ca.crt ConfigMap (kube-controller-manager's --root-ca-file):
	// what pods verify this server with. The server's CA if empty.
	RootCAFile string

	// ReadTimeout and WriteTimeout bound the reading of a request's body and
	// the writing of its response, for requests that are not watches or
	// streams (RequestTimeout, and RequestTimeout plus 30 s, if 0).
	ReadTimeout, WriteTimeout time.Duration

	// commitHook, when set, runs before each store commit and fails it with
	// its error (fault tests).
	commitHook func() error
}

// Upstream's limits and timeouts, the defaults of Config.
const (
	DefaultMaxRequestsInFlight            = 400 // kube-apiserver's --max-requests-inflight
	DefaultMaxMutatingRequestsInFlight    = 200 // kube-apiserver's --max-mutating-requests-inflight
	DefaultMaxLongRunningRequestsInFlight = 1000
	DefaultRequestTimeout                 = time.Minute      // kube-apiserver's --request-timeout
	DefaultReadHeaderTimeout              = 32 * time.Second // kube-apiserver's, just shy of its request timeout bound
	DefaultIdleTimeout                    = 90 * time.Second // kube-apiserver's, net/http's keep-alive
	writeTimeoutMargin                    = 30 * time.Second
)

// Service account and Service defaults, as a kubeadm cluster's.
const (
	DefaultServiceAccountIssuer             = "https://kubernetes.default.svc.cluster.local"
	DefaultServiceAccountMaxTokenExpiration = 24 * time.Hour
	DefaultServiceClusterIPRange            = "10.96.0.0/12"
	// minMaxTokenExpiration is the shortest maximum accepted: the token the
	// ServiceAccount admission projects into pods asks for 3607 s.
	minMaxTokenExpiration = time.Hour
)

func (c *Config) setDefaults() error {
	if c.DataDir == "" {
		return fmt.Errorf("apiserver: DataDir is required")
	}
	if c.BindAddress == "" {
		c.BindAddress = "127.0.0.1"
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("apiserver: invalid port %d", c.Port)
	}
	pki := filepath.Join(c.DataDir, "pki")
	if c.CACertFile == "" {
		c.CACertFile = filepath.Join(pki, auth.CACertFile)
	}
	if c.CAKeyFile == "" {
		c.CAKeyFile = filepath.Join(pki, auth.CAKeyFile)
	}
	if c.TLSCertFile == "" {
		c.TLSCertFile = filepath.Join(pki, auth.ServingCertFile)
	}
	if c.TLSKeyFile == "" {
		c.TLSKeyFile = filepath.Join(pki, auth.ServingKeyFile)
	}
	if c.ServiceAccountSigningKeyFile == "" {
		c.ServiceAccountSigningKeyFile = filepath.Join(pki, auth.ServiceAccountKeyFile)
	}
	if c.ServiceAccountIssuer == "" {
		c.ServiceAccountIssuer = DefaultServiceAccountIssuer
	}
	if len(c.APIAudiences) == 0 {
		c.APIAudiences = []string{c.ServiceAccountIssuer}
	}
	switch m := c.ServiceAccountMaxTokenExpiration; {
	case m == 0:
		c.ServiceAccountMaxTokenExpiration = DefaultServiceAccountMaxTokenExpiration
	case m < minMaxTokenExpiration:
		return fmt.Errorf("apiserver: the maximum token expiration must be at least %v, got %v", minMaxTokenExpiration, m)
	}
	if c.ServiceClusterIPRange == "" {
		c.ServiceClusterIPRange = DefaultServiceClusterIPRange
	}
	if _, err := admission.ParseServiceCIDR(c.ServiceClusterIPRange); err != nil {
		return fmt.Errorf("apiserver: service cluster IP range: %w", err)
	}
	if c.EventTTL == 0 {
		c.EventTTL = DefaultEventTTL
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.ClusterCIDR != "" {
		if c.NodeCIDRMaskSize == 0 {
			c.NodeCIDRMaskSize = 24
			if strings.Contains(c.ClusterCIDR, ":") {
				c.NodeCIDRMaskSize = 64
			}
		}
		if _, err := nodeipam.New(c.ClusterCIDR, c.NodeCIDRMaskSize); err != nil {
			return fmt.Errorf("apiserver: %w", err)
		}
	}
	if c.NodeMonitorGracePeriod == 0 {
		c.NodeMonitorGracePeriod = nodelifecycle.DefaultGracePeriod
	}
	for _, d := range []struct {
		v   *int
		def int
	}{{&c.MaxRequestsInFlight, DefaultMaxRequestsInFlight}, {&c.MaxMutatingRequestsInFlight, DefaultMaxMutatingRequestsInFlight},
		{&c.MaxLongRunningRequestsInFlight, DefaultMaxLongRunningRequestsInFlight}} {
		if *d.v < 0 {
			return fmt.Errorf("apiserver: in-flight limits must not be negative")
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.RequestTimeout, DefaultRequestTimeout}, {&c.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{&c.IdleTimeout, DefaultIdleTimeout}, {&c.ReadTimeout, c.RequestTimeout},
		{&c.WriteTimeout, c.RequestTimeout + writeTimeoutMargin}} {
		if *d.v < 0 {
			return fmt.Errorf("apiserver: timeouts must not be negative")
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	return nil
}
