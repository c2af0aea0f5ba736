package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Outcome is what one probe found.
type Outcome int

// The outcomes of a probe, as upstream's: a warning counts as a success, with an event.
const (
	Success Outcome = iota
	Warning
	Failure
	Unknown
)

// maxOutput is how much of a probe's output (exec output, HTTP body) is kept, as upstream keeps it.
const maxOutput = 10 << 10

// Execer runs a command in a container (the runtime's ExecSync).
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// ExitCoder is an error that carries a command's exit code (the CRI clients' exec errors do).
type ExitCoder interface{ ExitStatus() int }

// Exec runs cmd in the container within timeout: success on exit code 0, failure otherwise with the
// command's output.
func Exec(ctx context.Context, e Execer, containerID string, cmd []string, timeout time.Duration) (Outcome, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Second) // the runtime enforces timeout itself
	defer cancel()
	stdout, stderr, err := e.ExecSync(ctx, containerID, cmd, timeout)
	out := truncate(string(append(stdout, stderr...)))
	if err == nil {
		return Success, out, nil
	}
	var ec ExitCoder
	if errors.As(err, &ec) {
		return Failure, out, nil
	}
	if msg := err.Error(); errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded ||
		strings.Contains(msg, "timed out") || strings.Contains(msg, "timeout") {
		return Failure, fmt.Sprintf("command timed out: %q timed out after %v", strings.Join(cmd, " "), timeout), nil
	}
	return Unknown, "", err
}

// HTTPClient sends HTTP probes and hooks. As upstream's kubelet, it does not verify the server's
// certificate for HTTPS (pods serve self-signed ones, for names the kubelet does not dial), keeps no
// connection, uses no proxy, and follows redirects to the same host only: a redirect elsewhere ends the
// probe, which then succeeds with a warning.
var HTTPClient = &http.Client{
	Transport: &http.Transport{
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // upstream's behaviour, see above
		DisableKeepAlives:  true,
		DisableCompression: true,
		Proxy:              nil,
	},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	},
}

// userAgent is the User-Agent of probes when the probe sets none, as upstream's ("kube-probe/1.35").
const userAgent = "kube-probe/1.35"

// HTTPGet sends a GET to u with the headers, within timeout: success for a status from 200 to 399, a
// warning when a redirect to another host ended it, failure otherwise.
func HTTPGet(ctx context.Context, u *url.URL, headers []v1.HTTPHeader, timeout time.Duration) (Outcome, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Failure, err.Error(), nil
	}
	for _, h := range headers {
		req.Header.Add(h.Name, h.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", userAgent)
	}
	if v, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	} else if len(v) == 1 && v[0] == "" {
		req.Header.Del("Accept")
	}
	req.Host = req.Header.Get("Host")
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOutput+1))
	if err != nil {
		return Failure, err.Error(), nil
	}
	b := truncate(string(body))
	switch {
	case resp.StatusCode >= http.StatusMultipleChoices && resp.StatusCode < http.StatusBadRequest:
		return Warning, fmt.Sprintf("Probe terminated redirects, Response body: %v", b), nil
	case resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusBadRequest:
		return Success, b, nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
}

// TCP connects to host:port within timeout: success when it connects.
func TCP(ctx context.Context, host string, port int, timeout time.Duration) (Outcome, string, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return Failure, err.Error(), nil
	}
	_ = conn.Close()
	return Success, "", nil
}

// GRPC asks host:port's standard health service for service within timeout: success when it serves.
func GRPC(ctx context.Context, host string, port int, service string, timeout time.Duration) (Outcome, string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(userAgent))
	if err != nil {
		return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err), nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		st, ok := status.FromError(err)
		switch {
		case ok && st.Code() == codes.Unimplemented:
			return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message()), nil
		case ok && st.Code() == codes.DeadlineExceeded:
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		case ok && st.Code() == codes.Unavailable:
			return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, st.Message()), nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %+v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return Success, "service healthy", nil
}

// Port turns a probe's or hook's numeric or named port into a number: a name is one of the container's
// ports, as upstream resolves it.
func Port(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.String {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
		n, err := strconv.Atoi(p.StrVal) // upstream takes a number written as a string too
		if err != nil {
			return 0, fmt.Errorf("port %q not found in container %q", p.StrVal, c.Name)
		}
		p = intstr.FromInt32(int32(n))
	}
	if p.IntVal <= 0 || p.IntVal > 65535 {
		return 0, fmt.Errorf("invalid port number: %v", p.IntVal)
	}
	return int(p.IntVal), nil
}

// HTTPURL is the URL an httpGet probe or hook asks for: its scheme, its host or else podIP, its port and
// path.
func HTTPURL(g *v1.HTTPGetAction, c *v1.Container, podIP string) (*url.URL, error) {
	port, err := Port(g.Port, c)
	if err != nil {
		return nil, err
	}
	host := g.Host
	if host == "" {
		host = podIP
	}
	if host == "" {
		return nil, errors.New("the pod has no IP yet")
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	if err != nil {
		return nil, err
	}
	return u, nil
}

func truncate(s string) string {
	if len(s) <= maxOutput {
		return s
	}
	return s[:maxOutput]
}
