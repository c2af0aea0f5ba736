package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/apiserver"
	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
	"github.com/nodeagent/kubelet/pkg/apiserver/nodelifecycle"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "snapshot" {
		if err := runSnapshot(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "apiserver snapshot:", err)
			os.Exit(1)
		}
		return
	}
	var cfg apiserver.Config
	var kubeconfig string
	flag.StringVar(&cfg.DataDir, "data-dir", "/var/lib/nodeagent/apiserver", "directory for the store and generated certificates")
	flag.StringVar(&cfg.BindAddress, "bind-address", "127.0.0.1", "address to listen on")
	flag.IntVar(&cfg.Port, "secure-port", apiserver.DefaultPort, "port to listen on (0 picks a free one)")
	flag.StringVar(&cfg.TokenFile, "token-auth-file", "", "static bearer tokens: token,user,uid,\"group1,group2\" per line")
	flag.StringVar(&cfg.CACertFile, "client-ca-file", "", "CA certificate (default <data-dir>/pki/ca.crt, generated)")
	flag.StringVar(&cfg.CAKeyFile, "client-ca-key-file", "", "CA key (default <data-dir>/pki/ca.key, generated)")
	flag.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "serving certificate (default issued by the CA)")
	flag.StringVar(&cfg.TLSKeyFile, "tls-private-key-file", "", "serving key")
	flag.StringVar(&cfg.KubeletCAFile, "kubelet-certificate-authority", "", "CA verifying kubelets' serving certificates (default: not verified)")
	var addrTypes string
	flag.StringVar(&addrTypes, "kubelet-preferred-address-types", joinTypes(apiserver.DefaultKubeletAddressTypes),
		"node address types to reach kubelets by, in order of preference")
	flag.DurationVar(&cfg.NodeMonitorGracePeriod, "node-monitor-grace-period", nodelifecycle.DefaultGracePeriod,
		"how long a node may go without a heartbeat before it is marked Unknown and tainted unreachable (negative: never)")
	flag.StringVar(&cfg.ClusterCIDR, "cluster-cidr", "", "hand out nodes' pod CIDRs (spec.podCIDR) from this range (default: none)")
	flag.IntVar(&cfg.NodeCIDRMaskSize, "node-cidr-mask-size", 0, "size of each node's pod CIDR within --cluster-cidr (default 24, or 64 for IPv6)")
	flag.DurationVar(&cfg.EventTTL, "event-ttl", apiserver.DefaultEventTTL, "how long events are kept after their last write")
	flag.IntVar(&cfg.MaxRequestsInFlight, "max-requests-inflight", apiserver.DefaultMaxRequestsInFlight,
		"non-mutating requests served at once; beyond, 429 with Retry-After")
	flag.IntVar(&cfg.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", apiserver.DefaultMaxMutatingRequestsInFlight,
		"mutating requests served at once; beyond, 429 with Retry-After")
	flag.IntVar(&cfg.MaxLongRunningRequestsInFlight, "max-long-running-requests-inflight", apiserver.DefaultMaxLongRunningRequestsInFlight,
		"watches and streams (logs, exec, attach, port-forward, node proxy) open at once; beyond, 429 with Retry-After")
	flag.DurationVar(&cfg.RequestTimeout, "request-timeout", apiserver.DefaultRequestTimeout,
		"how long a request other than a watch or stream may take; beyond, 504")
	flag.StringVar(&cfg.ServiceAccountIssuer, "service-account-issuer", apiserver.DefaultServiceAccountIssuer,
		"the issuer (iss) of the service account tokens the server signs and accepts")
	var audiences string
	flag.StringVar(&audiences, "api-audiences", "", "comma-separated audiences of the server's own tokens (default: the issuer)")
	flag.StringVar(&cfg.ServiceAccountSigningKeyFile, "service-account-signing-key-file", "",
		"PEM private key (RSA or P-256 ECDSA) signing service account tokens (default <data-dir>/pki/sa.key, generated)")
	flag.DurationVar(&cfg.ServiceAccountMaxTokenExpiration, "service-account-max-token-expiration",
		apiserver.DefaultServiceAccountMaxTokenExpiration, "the longest validity a TokenRequest gets; longer requests are shortened")
	flag.StringVar(&cfg.ServiceClusterIPRange, "service-cluster-ip-range", apiserver.DefaultServiceClusterIPRange,
		"CIDR Services' cluster IPs are allocated from; its first address is the kubernetes Service's")
	flag.StringVar(&cfg.RootCAFile, "root-ca-file", "",
		"CA bundle published in every namespace as the kube-root-ca.crt ConfigMap (default: the server's CA)")
	flag.StringVar(&kubeconfig, "admin-kubeconfig", "", "write an admin kubeconfig here (default <data-dir>/admin.kubeconfig)")
	cfg.KubeletHosts = map[string]string{}
	flag.Func("kubelet-host", "`NODE=HOST`: reach node NODE's kubelet at HOST, ahead of its addresses (repeatable)", pairFlag(cfg.KubeletHosts))
	nodeKubeconfigs := map[string]string{}
	flag.Func("node-kubeconfig", "`NODE=PATH`: write a kubeconfig for system:node:NODE to PATH once serving (repeatable)", pairFlag(nodeKubeconfigs))
	klog.InitFlags(nil) // -v and the other log flags, as the kubelet's
	flag.Parse()
	types, err := parseTypes(addrTypes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiserver: --kubelet-preferred-address-types:", err)
		os.Exit(2)
	}
	cfg.KubeletPreferredAddressTypes = types
	for _, a := range strings.Split(audiences, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.APIAudiences = append(cfg.APIAudiences, a)
		}
	}
	if cfg.ServiceAccountMaxTokenExpiration < time.Hour {
		fmt.Fprintln(os.Stderr, "apiserver: --service-account-max-token-expiration must be at least 1h")
		os.Exit(2)
	}
	if cfg.EventTTL <= 0 {
		fmt.Fprintln(os.Stderr, "apiserver: --event-ttl must be positive")
		os.Exit(2)
	}
	if cfg.MaxRequestsInFlight <= 0 || cfg.MaxMutatingRequestsInFlight <= 0 || cfg.MaxLongRunningRequestsInFlight <= 0 || cfg.RequestTimeout <= 0 {
		fmt.Fprintln(os.Stderr, "apiserver: in-flight limits and --request-timeout must be positive")
		os.Exit(2)
	}
	if err := run(cfg, kubeconfig, nodeKubeconfigs); err != nil {
		fmt.Fprintln(os.Stderr, "apiserver:", err)
		os.Exit(1)
	}
}

func run(cfg apiserver.Config, kubeconfig string, nodeKubeconfigs map[string]string) error {
	if kubeconfig == "" {
		kubeconfig = cfg.DataDir + "/admin.kubeconfig"
	}
	s, err := apiserver.New(cfg)
	if err != nil {
		return err
	}
	if err := s.WriteAdminKubeconfig(kubeconfig); err != nil {
		_ = s.Stop()
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.Start(ctx); err != nil {
		_ = s.Stop()
		return err
	}
	fmt.Printf("serving on %s; admin kubeconfig: %s\n", s.URL(), kubeconfig)
	// A node's kubeconfig is written once the server serves: a kubelet that starts this server waits for it.
	for node, path := range nodeKubeconfigs {
		cc, err := s.NodeClientConfig(node)
		if err == nil {
			err = apiserver.WriteKubeconfig(path, cc, auth.NodeUserPrefix+node) // atomic: a waiting kubelet never reads half
		}
		if err != nil {
			_ = s.Stop()
			return fmt.Errorf("--node-kubeconfig %s: %w", node, err)
		}
	}
	<-ctx.Done()
	return s.Stop()
}

// pairFlag parses NAME=VALUE into m.
func pairFlag(m map[string]string) func(string) error {
	return func(v string) error {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" || value == "" {
			return fmt.Errorf("want NAME=VALUE, got %q", v)
		}
		m[name] = value
		return nil
	}
}

func joinTypes(types []corev1.NodeAddressType) string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = string(t)
	}
	return strings.Join(out, ",")
}

// parseTypes parses a comma-separated list of node address types.
func parseTypes(s string) ([]corev1.NodeAddressType, error) {
	var out []corev1.NodeAddressType
	for _, part := range strings.Split(s, ",") {
		switch t := corev1.NodeAddressType(strings.TrimSpace(part)); t {
		case corev1.NodeHostName, corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			out = append(out, t)
		default:
			return nil, fmt.Errorf("unknown node address type %q", part)
		}
	}
	return out, nil
}
