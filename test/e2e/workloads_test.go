//go:build e2e

package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// podLogs returns the logs of the pod's container.
func (n *node) podLogs(t *testing.T, pod, container string) string {
	t.Helper()
	var out string
	eventually(t, 30*time.Second, "the container's log", func() error {
		b, err := n.client.CoreV1().Pods("default").GetLogs(pod, &v1.PodLogOptions{Container: container}).Do(context.Background()).Raw()
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return errors.New("empty log")
		}
		out = string(b)
		return nil
	})
	return out
}

// A pod with runAsUser runs as that user, pause container included, on both runtime backends.
func TestKubeletNonRootPod(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, n *node) {
		p := busyboxPod("nonroot", "sh", "-c", "id; exec sleep 3600")
		uid, gid := int64(1001), int64(2002)
		p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid}
		n.createPod(p)
		n.waitPod("nonroot", 60*time.Second, "the non-root pod ready", ready)
		if out := n.podLogs(t, "nonroot", "main"); !strings.HasPrefix(out, "uid=1001 gid=2002") {
			t.Errorf("id in the pod: %q", out)
		}
	})
}
