package apiserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilremotecommand "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	remotecommandserver "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
	"k8s.io/utils/ptr"
)

// fakeKubelet is a kubelet endpoint over TLS that requires a client
// certificate from the apiserver's CA and records what reaches it.
type fakeKubelet struct {
	srv *httptest.Server

	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	path, query, user, auth string
	groups                  []string
}

func newFakeKubelet(t *testing.T, caPEM []byte) *fakeKubelet {
	k := &fakeKubelet{}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(k.serve))
	k.srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	k.srv.StartTLS()
	t.Cleanup(k.srv.Close)
	return k
}

func (k *fakeKubelet) serve(w http.ResponseWriter, r *http.Request) {
	cert := r.TLS.PeerCertificates[0]
	k.mu.Lock()
	k.seen = append(k.seen, seenRequest{path: r.URL.Path, query: r.URL.RawQuery, user: cert.Subject.CommonName,
		groups: cert.Subject.Organization, auth: r.Header.Get("Authorization")})
	k.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch parts[0] {
	case "containerLogs":
		_, _ = io.WriteString(w, "line one\nline two\n")
	case "exec":
		opts, err := remotecommandserver.NewOptions(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		remotecommandserver.ServeExec(w, r, echoExecutor{}, parts[2], "", parts[3], r.URL.Query()["command"], opts,
			time.Minute, 10*time.Second, utilremotecommand.SupportedStreamingProtocols)
	default:
		_, _ = fmt.Fprintf(w, "kubelet %s", r.URL.Path)
	}
}

func (k *fakeKubelet) last() seenRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.seen) == 0 {
		return seenRequest{}
	}
	return k.seen[len(k.seen)-1]
}

func (k *fakeKubelet) port() int32 {
	_, p, _ := net.SplitHostPort(k.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// echoExecutor writes its command line to stdout.
type echoExecutor struct{}

func (echoExecutor) ExecInContainer(_ context.Context, _ string, _ types.UID, container string, cmd []string,
	_ io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	_, err := fmt.Fprintf(out, "%s: %s\n", container, strings.Join(cmd, " "))
	return err
}

// registerNode creates node name with the given addresses and kubelet port.
func registerNode(t *testing.T, ts *testServer, name string, port int32, addrs ...corev1.NodeAddress) {
	t.Helper()
	ctx := ctxT(t)
	n, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = addrs
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	if _, err := ts.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestProxyToKubelet(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	kl := newFakeKubelet(t, ts.CACertPEM())
	// The default preference takes the Hostname first.
	registerNode(t, ts, "n1", kl.port(), corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.1"},
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: "127.0.0.1"})
	pod := testPod("p")
	pod.Spec.NodeName = "n1"
	pods := ts.client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	logs, err := pods.GetLogs("p", &corev1.PodLogOptions{Follow: true, TailLines: ptr.To[int64](5), Timestamps: true,
		SinceSeconds: ptr.To[int64](60), LimitBytes: ptr.To[int64](100)}).DoRaw(ctx)
	if err != nil || string(logs) != "line one\nline two\n" {
		t.Fatalf("logs: %v %q", err, logs)
	}
	got := kl.last()
	if got.path != "/containerLogs/default/p/c" || got.query != "follow=true&limitBytes=100&sinceSeconds=60&tailLines=5&timestamps=true" {
		t.Errorf("kubelet got %s?%s", got.path, got.query)
	}
	if got.user != KubeletClientUser || len(got.groups) != 1 || got.groups[0] != "system:masters" || got.auth != "" {
		t.Errorf("kubelet saw client %q %v, Authorization %q", got.user, got.groups, got.auth)
	}

	// Bad options are refused before the kubelet is reached.
	for name, opts := range map[string]*corev1.PodLogOptions{
		"negative tailLines": {TailLines: ptr.To[int64](-1)},
		"unknown container":  {Container: "nope"},
	} {
		if _, err := pods.GetLogs("p", opts).DoRaw(ctx); !apierrors.IsBadRequest(err) {
			t.Errorf("%s: want BadRequest, got %v", name, err)
		}
	}
	unbound := testPod("unbound")
	if _, err := pods.Create(ctx, unbound, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.GetLogs("unbound", &corev1.PodLogOptions{}).DoRaw(ctx); !apierrors.IsBadRequest(err) {
		t.Errorf("logs of an unbound pod: want BadRequest, got %v", err)
	}

	// exec over SPDY and over WebSocket, both upgraded end to end.
	execURL := ts.client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("p").
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{Command: []string{"echo", "hi"}, Stdout: true, Stderr: true},
		scheme.ParameterCodec).URL()
	spdy, err := remotecommand.NewSPDYExecutor(ts.cfg, "POST", execURL)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := remotecommand.NewWebSocketExecutorForProtocols(ts.cfg, "GET", execURL.String(), utilremotecommand.StreamProtocolV4Name)
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]remotecommand.Executor{"SPDY": spdy, "WebSocket": ws} {
		var out bytes.Buffer
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: io.Discard}); err != nil {
			t.Fatalf("exec over %s: %v", name, err)
		}
		if out.String() != "c: echo hi\n" {
			t.Errorf("exec over %s: %q", name, out.String())
		}
		if got := kl.last(); got.path != "/exec/default/p/c" || got.query != "command=echo&command=hi&error=1&output=1" {
			t.Errorf("exec over %s: kubelet got %s?%s", name, got.path, got.query)
		}
	}
	if err := ts.client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("p").
		SubResource("exec").Param("command", "true").Do(ctx).Error(); !apierrors.IsBadRequest(err) {
		t.Errorf("exec without streams: want BadRequest, got %v", err)
	}

	// port-forward and nodes/proxy map onto the kubelet's paths.
	rc := ts.client.CoreV1().RESTClient()
	if _, err := rc.Get().Namespace("default").Resource("pods").Name("p").SubResource("portforward").
		Param("ports", "8080").Param("ports", "9090").DoRaw(ctx); err != nil {
		t.Fatal(err)
	}
	if got := kl.last(); got.path != "/portForward/default/p" || got.query != "port=8080&port=9090" {
		t.Errorf("portforward: kubelet got %s?%s", got.path, got.query)
	}
	body, err := rc.Get().AbsPath("/api/v1/nodes/n1/proxy/stats/summary").Param("only_cpu_and_memory", "true").DoRaw(ctx)
	if err != nil || string(body) != "kubelet /stats/summary" {
		t.Fatalf("nodes/proxy: %v %q", err, body)
	}
	if got := kl.last(); got.query != "only_cpu_and_memory=true" {
		t.Errorf("nodes/proxy query: %q", got.query)
	}
}

func TestProxyAddressPreference(t *testing.T) {
	t.Parallel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
			{Type: corev1.NodeHostName, Address: "host-n"}, {Type: corev1.NodeExternalIP, Address: "::1"}}}}
	for _, tc := range []struct {
		prefer []corev1.NodeAddressType
		port   int32
		want   string
	}{
		{nil, 0, "https://host-n:10250"},
		{[]corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeHostName}, 10255, "https://10.0.0.1:10255"},
		{[]corev1.NodeAddressType{corev1.NodeInternalDNS, corev1.NodeExternalIP}, 1, "https://[::1]:1"},
		{[]corev1.NodeAddressType{corev1.NodeExternalDNS}, 1, ""},
	} {
		p := &nodeProxy{addrTypes: tc.prefer}
		if p.addrTypes == nil {
			p.addrTypes = DefaultKubeletAddressTypes
		}
		n := node.DeepCopy()
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = tc.port
		u, err := p.location(n)
		switch {
		case tc.want == "" && !apierrors.IsServiceUnavailable(err):
			t.Errorf("%v: want ServiceUnavailable, got %v %v", tc.prefer, u, err)
		case tc.want != "" && (err != nil || u.String() != tc.want):
			t.Errorf("%v: got %v %v, want %s", tc.prefer, u, err, tc.want)
		}
	}
}
