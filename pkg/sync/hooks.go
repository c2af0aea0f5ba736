package podsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/nodeagent/kubelet/pkg/prober"
	v1 "k8s.io/api/core/v1"
)

// runHook runs a lifecycle handler (exec, httpGet or sleep) for a container, bounded by ctx and, for exec,
// by timeout (0: none).
func (k *Kubelet) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, h *v1.LifecycleHandler, timeout time.Duration) error {
	switch {
	case h.Exec != nil:
		_, stderr, err := k.runtime.ExecSync(ctx, containerID, h.Exec.Command, timeout)
		if err != nil {
			return fmt.Errorf("exec %v: %w (stderr %q)", h.Exec.Command, err, truncate(string(stderr), 256))
		}
		return nil
	case h.HTTPGet != nil:
		return k.httpHook(ctx, pod, c, h.HTTPGet)
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

// httpHook sends an httpGet hook to the pod's IP (or the hook's host), a named port being one of the
// container's, through the prober's client (no certificate check, no proxy, no kept connection).
func (k *Kubelet) httpHook(ctx context.Context, pod *v1.Pod, c *v1.Container, g *v1.HTTPGetAction) error {
	podIP := ""
	if st, ok := k.status.PodStatus(pod.UID); ok {
		podIP = st.PodIP
	}
	u, err := prober.HTTPURL(g, c, podIP)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := prober.HTTPClient.Do(req)
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
