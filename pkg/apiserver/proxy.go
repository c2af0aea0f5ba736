package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/validation"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// KubeletClientUser is the identity the apiserver presents to kubelets, in
// group system:masters, as upstream's kube-apiserver-kubelet-client.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// DefaultKubeletPort is the kubelet port used when a node publishes none.
const DefaultKubeletPort = 10250

// DefaultKubeletAddressTypes is upstream's default preference of node
// addresses for reaching kubelets.
var DefaultKubeletAddressTypes = []corev1.NodeAddressType{corev1.NodeHostName, corev1.NodeInternalDNS,
	corev1.NodeInternalIP, corev1.NodeExternalDNS, corev1.NodeExternalIP}

// kubeletCertRenewBefore is how long before expiry the client certificate
// presented to kubelets is issued anew.
const kubeletCertRenewBefore = 24 * time.Hour

// nodeProxy forwards pods' log/exec/attach/portforward and nodes/proxy to the
// node's kubelet endpoint, passing upgraded (SPDY, WebSocket) connections
// through.
type nodeProxy struct {
	store     *storage.Store
	decode    func(*storage.Object) (runtime.Object, error)
	ca        *auth.CA
	clock     clock.PassiveClock
	addrTypes []corev1.NodeAddressType
	hosts     map[string]string // node name -> host, ahead of the node's addresses
	roots     *x509.CertPool    // nil: kubelets' serving certificates are not verified, as upstream without a kubelet CA

	mu       sync.Mutex
	cert     *tls.Certificate
	notAfter time.Time
}

func newNodeProxy(store *storage.Store, ca *auth.CA, cfg *Config) (*nodeProxy, error) {
	p := &nodeProxy{store: store, decode: store.Decode, ca: ca, clock: cfg.Clock, addrTypes: cfg.KubeletPreferredAddressTypes,
		hosts: cfg.KubeletHosts}
	if len(p.addrTypes) == 0 {
		p.addrTypes = DefaultKubeletAddressTypes
	}
	if cfg.KubeletCAFile != "" {
		data, err := os.ReadFile(cfg.KubeletCAFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet CA: %w", err)
		}
		p.roots = x509.NewCertPool()
		if !p.roots.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("kubelet CA %s: no certificates", cfg.KubeletCAFile)
		}
	}
	return p, nil
}

// ServeProxy implements rest.Proxy.
func (p *nodeProxy) ServeProxy(w http.ResponseWriter, r *http.Request, info *request.Info) {
	target, err := p.target(r, info)
	if err != nil {
		rest.WriteError(w, err)
		return
	}
	loc, err := p.location(target.node)
	if err != nil {
		rest.WriteError(w, err)
		return
	}
	loc.Path, loc.RawQuery = target.path, target.query.Encode()
	transport, err := p.transport(target.insecure)
	if err != nil {
		rest.WriteError(w, apierrors.NewInternalError(err))
		return
	}
	out := r.Clone(r.Context())
	out.Header.Del("Authorization") // the caller's credentials are not the kubelet's business
	out.URL.RawQuery = loc.RawQuery
	h := proxy.NewUpgradeAwareHandler(loc, transport, false, false, proxyErrorResponder{node: target.node.Name})
	h.UseLocationHost = true
	streamTranslator(h, loc, transport, info, r.URL.Query()).ServeHTTP(w, out)
}

// streamTranslator wraps the proxy to a kubelet as kube-apiserver does: kubectl's WebSocket exec and attach
// (v5.channel.k8s.io) are translated to SPDY, which kubelets' streaming servers speak, and its WebSocket
// port-forward tunnels an SPDY connection. Without it kubectl's WebSocket attempt fails at the kubelet and
// kubectl falls back to SPDY, one failed upgrade (and a kubelet error) per command later.
func streamTranslator(h http.Handler, loc *url.URL, transport http.RoundTripper, info *request.Info, q url.Values) http.Handler {
	if info.Resource != "pods" {
		return h
	}
	switch info.Subresource {
	case "exec", "attach":
		on := func(name string) bool { v, err := boolParam(q, name); return err == nil && v }
		opts := translator.Options{Stdin: on("stdin"), Stdout: on("stdout"), Stderr: on("stderr"), Tty: on("tty")}
		return translator.NewTranslatingHandler(h, translator.NewStreamTranslatorHandler(loc, transport, 0, opts),
			wsstream.IsWebSocketRequestWithStreamCloseProtocol)
	case "portforward":
		return translator.NewTranslatingHandler(h, translator.NewTunnelingHandler(h), wsstream.IsWebSocketRequestWithTunnelingProtocol)
	}
	return h
}

// proxyTarget is a node and the kubelet path and query a request maps to.
type proxyTarget struct {
	node     *corev1.Node
	path     string
	query    url.Values
	insecure bool // insecureSkipTLSVerifyBackend on a log request
}

func (p *nodeProxy) target(r *http.Request, info *request.Info) (*proxyTarget, error) {
	if info.Resource == "nodes" {
		node, err := p.proxiedNode(info.Name)
		if err != nil {
			return nil, err
		}
		return &proxyTarget{node: node, path: "/" + info.SubPath, query: r.URL.Query()}, nil
	}
	pod, err := p.pod(info.Namespace, info.Name)
	if err != nil {
		return nil, err
	}
	if pod.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	node, err := p.node(pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	query := r.URL.Query()
	t := &proxyTarget{node: node}
	switch info.Subresource {
	case "log":
		t.path, t.query, t.insecure, err = logTarget(pod, query)
	case "exec", "attach":
		t.path, t.query, err = streamTarget(pod, info.Subresource, query)
	case "portforward":
		t.path = "/portForward/" + pod.Namespace + "/" + pod.Name
		t.query = url.Values{}
		for _, port := range query["ports"] {
			for _, s := range strings.Split(port, ",") {
				n, perr := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
				if perr != nil || n == 0 {
					return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid port %q", s))
				}
				t.query.Add(corev1.PortHeader, strconv.FormatUint(n, 10))
			}
		}
	default:
		err = apierrors.NewNotFound(corev1.Resource("pods/"+info.Subresource), info.Name)
	}
	return t, err
}

// logTarget maps pods/log options onto the kubelet's /containerLogs query.
func logTarget(pod *corev1.Pod, q url.Values) (string, url.Values, bool, error) {
	c, err := containerOf(pod, q.Get("container"), true)
	if err != nil {
		return "", nil, false, err
	}
	out := url.Values{}
	for _, b := range []string{"follow", "previous", "timestamps"} {
		if v, err := boolParam(q, b); err != nil {
			return "", nil, false, err
		} else if v {
			out.Set(b, "true")
		}
	}
	for _, n := range []struct {
		name string
		min  int64
	}{{"sinceSeconds", 1}, {"tailLines", 0}, {"limitBytes", 1}} {
		s := q.Get(n.name)
		if s == "" {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < n.min {
			return "", nil, false, apierrors.NewBadRequest(fmt.Sprintf("%s must be an integer of at least %d, not %q", n.name, n.min, s))
		}
		out.Set(n.name, strconv.FormatInt(v, 10))
	}
	if s := q.Get("sinceTime"); s != "" {
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return "", nil, false, apierrors.NewBadRequest(fmt.Sprintf("invalid sinceTime %q: %v", s, err))
		}
		if out.Has("sinceSeconds") {
			return "", nil, false, apierrors.NewBadRequest("at most one of sinceTime or sinceSeconds may be specified")
		}
		out.Set("sinceTime", ts.Format(time.RFC3339))
	}
	insecure, err := boolParam(q, "insecureSkipTLSVerifyBackend")
	if err != nil {
		return "", nil, false, err
	}
	return "/containerLogs/" + pod.Namespace + "/" + pod.Name + "/" + c, out, insecure, nil
}

// streamTarget maps exec and attach options onto the kubelet's query.
func streamTarget(pod *corev1.Pod, sub string, q url.Values) (string, url.Values, error) {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", nil, apierrors.NewBadRequest(fmt.Sprintf("cannot %s into a container in a completed pod; current phase is %s", sub, pod.Status.Phase))
	}
	c, err := containerOf(pod, q.Get("container"), false)
	if err != nil {
		return "", nil, err
	}
	out := url.Values{}
	streams := false
	for _, s := range []struct{ in, out string }{{"stdin", corev1.ExecStdinParam}, {"stdout", corev1.ExecStdoutParam},
		{"stderr", corev1.ExecStderrParam}, {"tty", corev1.ExecTTYParam}} {
		v, err := boolParam(q, s.in)
		if err != nil {
			return "", nil, err
		}
		if v {
			out.Set(s.out, "1")
			streams = streams || s.in != "tty"
		}
	}
	if !streams {
		return "", nil, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	if sub == "exec" {
		if len(q["command"]) == 0 {
			return "", nil, apierrors.NewBadRequest("you must specify a command")
		}
		out["command"] = q["command"]
	}
	return "/" + sub + "/" + pod.Namespace + "/" + pod.Name + "/" + c, out, nil
}

// containerOf returns the named container of pod, or its only container when
// name is empty.
func containerOf(pod *corev1.Pod, name string, anyKind bool) (string, error) {
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	if name == "" {
		if len(names) == 1 {
			return names[0], nil
		}
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, names))
	}
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	for _, n := range names {
		if n == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

func boolParam(q url.Values, name string) (bool, error) {
	switch s := q.Get(name); s {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, apierrors.NewBadRequest(fmt.Sprintf("invalid %s %q", name, s))
	}
}

func (p *nodeProxy) pod(ns, name string) (*corev1.Pod, error) {
	o, ok := p.store.Get("pods/" + ns + "/" + name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	obj, err := p.decode(o)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj.(*corev1.Pod), nil
}

// proxiedNode returns the node a nodes/proxy request names. As upstream, the
// name may carry a scheme and port ([scheme:]name[:port]); unlike upstream,
// which then proxies to any port of the node's address, only the node's own
// kubelet endpoint is reached: another scheme or port is refused.
func (p *nodeProxy) proxiedNode(id string) (*corev1.Node, error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid node request %q", id))
	}
	node, err := p.node(name)
	if err != nil {
		return nil, err
	}
	if scheme != "" && scheme != "https" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("node %s: only its kubelet's https endpoint is proxied, not %s", name, scheme))
	}
	if port != "" && port != strconv.Itoa(kubeletPort(node)) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("node %s: only its kubelet port %d is proxied, not %s", name, kubeletPort(node), port))
	}
	return node, nil
}

// kubeletPort is the port node publishes for its kubelet, DefaultKubeletPort
// if none.
func kubeletPort(node *corev1.Node) int {
	if port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port); port > 0 && port <= 65535 {
		return port
	}
	return DefaultKubeletPort
}

func (p *nodeProxy) node(name string) (*corev1.Node, error) {
	o, ok := p.store.Get("nodes//" + name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	obj, err := p.decode(o)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj.(*corev1.Node), nil
}

// location returns the kubelet endpoint of node: its first address of the
// preferred types, and its published kubelet port.
func (p *nodeProxy) location(node *corev1.Node) (*url.URL, error) {
	host := p.hosts[node.Name]
	for _, typ := range p.addrTypes {
		if host != "" {
			break
		}
		for _, a := range node.Status.Addresses {
			if a.Type == typ && isHost(a.Address) {
				host = a.Address
				break
			}
		}
		if host != "" {
			break
		}
	}
	if host == "" {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s has no address of the types %v", node.Name, p.addrTypes))
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(kubeletPort(node)))}, nil
}

// isHost reports whether a node address can only name a host: an IP address
// or a DNS name, nothing that could carry a port, user or path into the URL.
func isHost(addr string) bool {
	return net.ParseIP(addr) != nil || len(validation.IsDNS1123Subdomain(strings.ToLower(addr))) == 0
}

// transport returns a transport presenting the kubelet client certificate.
func (p *nodeProxy) transport(insecure bool) (*http.Transport, error) {
	cert, err := p.clientCert()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12, RootCAs: p.roots,
		InsecureSkipVerify: p.roots == nil || insecure} //nolint:gosec // as upstream without --kubelet-certificate-authority
	return &http.Transport{TLSClientConfig: cfg, Proxy: nil, DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second, ForceAttemptHTTP2: false}, nil
}

// clientCert returns the certificate the apiserver presents to kubelets,
// issued from its CA and renewed before it expires.
func (p *nodeProxy) clientCert() (*tls.Certificate, error) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cert != nil && now.Before(p.notAfter.Add(-kubeletCertRenewBefore)) {
		return p.cert, nil
	}
	certPEM, keyPEM, err := p.ca.Issue(KubeletClientUser, []string{auth.GroupMasters}, nil, now, clientCertValidity)
	if err != nil {
		return nil, fmt.Errorf("issue kubelet client certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	p.cert, p.notAfter = &cert, now.Add(clientCertValidity)
	return p.cert, nil
}

// proxyErrorResponder reports a failure to reach a kubelet as a Status.
type proxyErrorResponder struct{ node string }

func (e proxyErrorResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	rest.WriteError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach the kubelet of node %s: %v", e.node, err)))
}
