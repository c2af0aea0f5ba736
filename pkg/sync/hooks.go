package podsync

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
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// runHook runs a lifecycle handler (exec, httpGet or sleep) for a container, bounded by ctx and, for exec,
// by timeout (0: none).
func (k *Kubelet) runHook(ctx context.Context, pod *v1.Pod, containerID string, h *v1.LifecycleHandler, timeout time.Duration) error {
	switch {
	case h.Exec != nil:
		_, stderr, err := k.runtime.ExecSync(ctx, containerID, h.Exec.Command, timeout)
		if err != nil {
			return fmt.Errorf("exec %v: %w (stderr %q)", h.Exec.Command, err, truncate(string(stderr), 256))
		}
		return nil
	case h.HTTPGet != nil:
		return k.httpHook(ctx, pod, h.HTTPGet)
	case h.Sleep != nil:
		select {
		case <-k.clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.New("hook has no handler")
}

func (k *Kubelet) httpHook(ctx context.Context, pod *v1.Pod, g *v1.HTTPGetAction) error {
	host := g.Host
	if host == "" {
		if st, ok := k.status.PodStatus(pod.UID); ok {
			host = st.PodIP
		}
	}
	if host == "" {
		return errors.New("no pod IP to send the HTTP hook to")
	}
	port, err := resolvePort(g.Port, pod)
	if err != nil {
		return err
	}
	scheme := "http"
	if g.Scheme == v1.URISchemeHTTPS {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := hookClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP hook %s returned %d", u.String(), resp.StatusCode)
	}
	return nil
}

// hookClient sends HTTP lifecycle hooks. As upstream's kubelet, it does not verify the server's certificate
// for HTTPS: pods serve self-signed ones, issued for names the kubelet does not dial (it dials the pod IP).
// Connections are not kept: every hook is a connection of its own.
var hookClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // upstream's behaviour, see above
	DisableKeepAlives: true,
	Proxy:             nil,
}}

// resolvePort turns a numeric or named port into a number.
func resolvePort(p intstr.IntOrString, pod *v1.Pod) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	return 0, fmt.Errorf("port %q not found", p.StrVal)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
