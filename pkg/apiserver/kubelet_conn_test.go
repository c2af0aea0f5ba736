package apiserver

import (
	"encoding/pem"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
)

// nodes/proxy reaches the node's kubelet endpoint only: a port or scheme in the node's name other than the
// kubelet's is refused, never dialed, and node addresses that are not plain hosts are not used.
func TestNodeProxyReachesOnlyTheKubelet(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	kl := newFakeKubelet(t, ts.CACertPEM())
	other := newFakeKubelet(t, ts.CACertPEM()) // another service on the node's host
	registerNode(t, ts, "n1", kl.port(), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "127.0.0.1"})
	registerNode(t, ts, "odd", kl.port(), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "x@127.0.0.1"},
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1:" + strconv.Itoa(int(other.port()))})
	rc := ts.client.CoreV1().RESTClient()
	kp := strconv.Itoa(int(kl.port()))
	for _, tc := range []struct {
		name string
		code int
	}{
		{"n1", http.StatusOK},
		{"n1:" + kp, http.StatusOK},
		{"https:n1:" + kp, http.StatusOK},
		{"n1:" + strconv.Itoa(int(other.port())), http.StatusBadRequest},
		{"http:n1:" + kp, http.StatusBadRequest},
		{"n1:22", http.StatusBadRequest},
		{"127.0.0.1:" + strconv.Itoa(int(other.port())), http.StatusNotFound},
		{"odd", http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			body, _ := rc.Get().AbsPath("/api/v1/nodes/" + tc.name + "/proxy/healthz").Do(ctx).StatusCode(&code).Raw()
			if code != tc.code {
				t.Fatalf("%d %s, want %d", code, body, tc.code)
			}
		})
	}
	if got := other.last(); got.path != "" {
		t.Errorf("the other service was reached: %+v", got)
	}
}

// With the kubelets' CA the server verifies their serving certificates.
func TestKubeletServingCertificateVerified(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Fake kubelets serve httptest's one certificate, for 127.0.0.1: it is its own CA.
	probe := startServer(t, "")
	kl := newFakeKubelet(t, probe.CACertPEM())
	good := filepath.Join(dir, "good.crt")
	if err := os.WriteFile(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kl.srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.crt")
	if err := os.WriteFile(bad, probe.CACertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ca string
		ok       bool
	}{{"its CA", good, true}, {"another CA", bad, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, "", func(c *Config) { c.KubeletCAFile = tc.ca })
			kl := newFakeKubelet(t, ts.CACertPEM())
			registerNode(t, ts, "n1", kl.port(), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "127.0.0.1"})
			tr, err := rest.TransportFor(ts.cfg)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: tr}).Get(ts.URL() + "/api/v1/nodes/n1/proxy/healthz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if tc.ok && resp.StatusCode != http.StatusOK {
				t.Fatalf("want the kubelet reached, got %d %s", resp.StatusCode, body)
			}
			if !tc.ok && (resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "certificate signed by unknown authority")) {
				t.Fatalf("want a certificate error, got %d %s", resp.StatusCode, body)
			}
		})
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// Keys and kubeconfigs are 0600, written whole, and older ones left readable by others are restricted.
func TestKeyAndKubeconfigFilesPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	pki := filepath.Join(dir, "pki")
	keys := []string{filepath.Join(pki, auth.CAKeyFile), filepath.Join(pki, auth.ServingKeyFile)}
	for _, k := range keys {
		if m := mode(t, k); m != 0o600 {
			t.Errorf("%s: mode %o", k, m)
		}
	}
	kc := filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(kc, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ts.WriteAdminKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, kc); m != 0o600 {
		t.Errorf("rewritten kubeconfig: mode %o", m)
	}
	if err := ts.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := os.Chmod(k, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startServer(t, dir)
	for _, k := range keys {
		if m := mode(t, k); m != 0o600 {
			t.Errorf("%s after restart: mode %o", k, m)
		}
	}
	for _, d := range []string{dir, pki} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp-") {
				t.Errorf("temporary file left: %s", filepath.Join(d, e.Name()))
			}
		}
	}
}
