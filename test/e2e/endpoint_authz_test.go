//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
)

// clusterCA loads the CA of the node's API server (the standalone one's, or the real control plane's), which
// signs client certificates that the kubelet's endpoint authenticates.
func (n *node) clusterCA(t *testing.T) *auth.CA {
	t.Helper()
	dir := filepath.Join(n.dir, "apiserver", "pki")
	switch {
	case n.cp != nil:
		dir = filepath.Dir(n.cp.ca)
	case n.ext != nil:
		dir = filepath.Join(n.ext.dataDir, "pki")
	}
	ca, err := auth.LoadOrCreateCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// kubeletURL is the base URL of the node's kubelet endpoint, from the port its Node publishes.
func (n *node) kubeletURL(t *testing.T) string {
	t.Helper()
	node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("https://127.0.0.1:%d", node.Status.DaemonEndpoints.KubeletEndpoint.Port)
}

// userClient is an HTTPS client with a certificate for user in groups, signed by ca; it does not check the
// kubelet's self-signed serving certificate.
func userClient(t *testing.T, ca *auth.CA, user string, groups ...string) *http.Client {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(user, groups, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // the test reaches the kubelet by address
}

// An ordinary user with a certificate of the cluster CA gets 403 from the kubelet's endpoint on exec, logs
// and pprof; an admin gets through. The kubelet asks its API server (SubjectAccessReview), whichever it is.
func TestKubeletEndpointAuthorization(t *testing.T) {
	parallel(t)
	n := startNode(t)
	n.createPod(busyboxPod("authz", "sh", "-c", "echo hello; exec sleep 3600"))
	n.waitPod("authz", 60*time.Second, "pod ready", ready)
	ca := n.clusterCA(t)
	base := n.kubeletURL(t)
	paths := map[string]string{
		"logs":  "/containerLogs/default/authz/main",
		"exec":  "/exec/default/authz/main?command=true&output=1",
		"pprof": "/debug/pprof/",
	}
	do := func(c *http.Client, path string) (int, string) {
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	jane := userClient(t, ca, "jane", "developers")
	admin := userClient(t, ca, "e2e-admin", "system:masters")
	for what, path := range paths {
		if code, body := do(jane, path); code != http.StatusForbidden || !strings.Contains(body, "user=jane") {
			t.Errorf("an ordinary user on %s: %d %q, want 403", what, code, body)
		}
		code, body := do(admin, path)
		if code == http.StatusUnauthorized || code == http.StatusForbidden {
			t.Errorf("an admin on %s: %d %q", what, code, body)
		}
		if what != "exec" && code != http.StatusOK {
			t.Errorf("an admin on %s: %d %q, want 200", what, code, body)
		}
	}
	if code, body := do(admin, paths["logs"]); body != "hello\n" {
		t.Errorf("admin logs: %d %q", code, body)
	}
}
