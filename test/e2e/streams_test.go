//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kubectl exec, attach and port-forward reach containers on both runtime backends: in-process streaming for
// the built-in runtime, the runtime's own streaming server (proxied by the kubelet) for containerd's CRI
// plugin.
func TestKubeletStreamsOnBothRuntimes(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		web := busyboxPod("web", "sh", "-c", "mkdir -p /www && echo served-by-pod > /www/index.html && exec httpd -f -p 8080 -h /www")
		n.createPod(web)
		talker := busyboxPod("talker", "sh", "-c", "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.2; done")
		n.createPod(talker)
		n.waitPod("web", 60*time.Second, "web ready", ready)
		n.waitPod("talker", 60*time.Second, "talker ready", ready)

		if out := n.execOut(t, "web", "main", "cat", "/www/index.html"); out != "served-by-pod\n" {
			t.Errorf("exec: %q", out)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second) // attach follows until stopped
		defer cancel()
		attach := exec.CommandContext(ctx, kubectlPath, "--kubeconfig", filepath.Join(n.dir, "admin.kubeconfig"), "attach", "talker", "-c", "main")
		out, _ := attach.CombinedOutput()
		if !strings.Contains(string(out), "tick-") {
			t.Errorf("attach printed %q", out)
		}

		port := freePort(t)
		pf := exec.Command(kubectlPath, "--kubeconfig", filepath.Join(n.dir, "admin.kubeconfig"), "port-forward", "pod/web",
			strconv.Itoa(port)+":8080")
		var pfOut syncBuffer
		pf.Stdout, pf.Stderr = &pfOut, &pfOut
		if err := pf.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
		eventually(t, 20*time.Second, "the page through port-forward", func() error {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", port))
			if err != nil {
				return fmt.Errorf("%v (kubectl: %s)", err, pfOut.String())
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if string(b) != "served-by-pod\n" {
				return fmt.Errorf("%d %q", resp.StatusCode, b)
			}
			return nil
		})
	})
}
