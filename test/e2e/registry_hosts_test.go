//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/ociimage"
	"github.com/nodeagent/kubelet/pkg/runtime"
)

// registryServer is one Debian docker-registry (distribution v2) on loopback.
type registryServer struct {
	addr    string
	storage string // several servers may share one
	// tls, when set, serves HTTPS with the PKI's server certificate; clientCerts also asks for a client
	// certificate signed by its CA.
	tls         *testPKI
	clientCerts bool
	htpasswd    string // a htpasswd file: basic authentication
}

// serve starts the registry and stops it when the test ends.
func (r registryServer) serve(t *testing.T) {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Fatalf("docker-registry is not installed (hack/setup.sh installs it): %v", err)
	}
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", r.storage, r.addr)
	if r.tls != nil {
		cfg += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", r.tls.serverCert, r.tls.serverKey)
		if r.clientCerts {
			cfg += fmt.Sprintf("    clientcas:\n      - %s\n", r.tls.ca)
		}
	}
	if r.htpasswd != "" {
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: nodeagent-e2e\n    path: %s\n", r.htpasswd)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	exited, err := startChild(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	eventually(t, 15*time.Second, "registry listening on "+r.addr, func() error {
		c, err := net.DialTimeout("tcp", r.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// testPKI is a CA of the test's own with a server certificate for 127.0.0.1 and a client certificate, as
// PEM files.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	pool                                             *x509.CertPool
	client                                           tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nodeagent e2e registry CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, IPAddresses: ips,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	p := &testPKI{ca: write("ca.pem", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	srvDER, srvKey := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.serverCert, p.serverKey = write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "PRIVATE KEY", keyDER(srvKey))
	cliDER, cliKey := issue(3, "node", x509.ExtKeyUsageClientAuth, nil)
	p.clientCert, p.clientKey = write("client.pem", "CERTIFICATE", cliDER), write("client-key.pem", "PRIVATE KEY", keyDER(cliKey))
	p.client = tls.Certificate{Certificate: [][]byte{cliDER}, PrivateKey: cliKey}
	return p
}

// pushTo pushes a busybox image with a file of its own (marker) to the registry at url as repo:tag.
func pushTo(t *testing.T, url, repo, tag, marker string, client *http.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	img := buildBusybox(t, marker)
	var opts []ociimage.PushOption
	if client != nil {
		opts = append(opts, ociimage.WithHTTPClient(client))
	}
	if err := img.Push(ctx, url, repo, tag, nil, opts...); err != nil {
		t.Fatalf("push %s/%s:%s: %v", url, repo, tag, err)
	}
}

// buildBusybox builds the host's busybox with /etc/marker holding marker.
func buildBusybox(t *testing.T, marker string) *ociimage.Image {
	t.Helper()
	return busyboxWith(t, withFile("/etc/marker", marker))
}

// writeHosts writes <root>/<host dir>/hosts.toml.
func writeHosts(t *testing.T, root, host, content string) {
	t.Helper()
	dir := filepath.Join(root, strings.ReplaceAll(host, ":", "_")+"_")
	if !strings.Contains(host, ":") {
		dir = filepath.Join(root, host)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The built-in runtime reads registry host configuration in containerd's certs.d format: a plain-HTTP
// mirror is tried first and the registry itself (over TLS from a CA of the test's own) when the mirror lacks
// the image; a registry's certificate from an unknown CA is a clear TLS error; a client certificate is sent
// where the registry asks for one; a malformed hosts.toml fails the pulls of its registry alone, naming the
// file.
func TestRegistryHostsConfig(t *testing.T) {
	pki := newTestPKI(t)
	const (
		mirrorAddr = "127.0.0.1:5001"
		tlsAddr    = "127.0.0.1:5443"
		mtlsAddr   = "127.0.0.1:5444"
		brokenAddr = "127.0.0.1:5445" // nothing listens: its hosts.toml is malformed
	)
	upstream := t.TempDir()
	registryServer{addr: mirrorAddr, storage: t.TempDir()}.serve(t)
	registryServer{addr: tlsAddr, storage: upstream, tls: pki}.serve(t)
	registryServer{addr: mtlsAddr, storage: upstream, tls: pki, clientCerts: true}.serve(t)

	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}}
	pushTo(t, "https://"+tlsAddr, "e2e/upstream-only", "1", "from the registry", tlsClient)
	pushTo(t, "https://"+tlsAddr, "e2e/both", "1", "from the registry", tlsClient)
	pushTo(t, "http://"+mirrorAddr, "e2e/both", "1", "from the mirror", nil)

	hosts := t.TempDir()
	writeHosts(t, hosts, tlsAddr, fmt.Sprintf(`server = "https://%s"
ca = %q

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, tlsAddr, pki.ca, mirrorAddr))
	writeHosts(t, hosts, mtlsAddr, fmt.Sprintf("server = \"https://%s\"\nca = %q\nclient = [[%q, %q]]\n", mtlsAddr, pki.ca, pki.clientCert, pki.clientKey))
	writeHosts(t, hosts, brokenAddr, "server = \"https://"+brokenAddr+"\"\n[host.\"http://x\"\n")
	noCA := t.TempDir()
	writeHosts(t, noCA, tlsAddr, fmt.Sprintf("server = \"https://%s\"\n", tlsAddr))
	writeHosts(t, noCA, mtlsAddr, fmt.Sprintf("server = \"https://%s\"\nca = %q\n", mtlsAddr, pki.ca))

	rt := builtinWith(t, func(c *runtime.Config) { c.RegistryHostsDir = hosts })
	bare := builtinWith(t, func(c *runtime.Config) { c.RegistryHostsDir = noCA })

	// marker pulls ref and runs cat /etc/marker in it.
	marker := func(t *testing.T, ref string) string {
		t.Helper()
		ctx := ctxT(t)
		if _, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
		t.Cleanup(func() { _ = rt.RemoveImage(context.Background(), &runtimeapi.ImageSpec{Image: ref}) })
		if st, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err != nil || st.GetImage() == nil || st.GetImage().Pinned {
			t.Errorf("pulled image %s: %v, %v (a pulled image is not pinned)", ref, st.GetImage(), err)
		}
		return runCat(t, backend{name: "builtin", rt: rt, images: rt, ns: "nodeagent"}, ref, "/etc/marker")
	}
	t.Run("mirror first", func(t *testing.T) {
		if got := marker(t, tlsAddr+"/e2e/both:1"); got != "from the mirror" {
			t.Fatalf("image content %q, want the mirror's", got)
		}
	})
	t.Run("registry when the mirror lacks the image", func(t *testing.T) {
		if got := marker(t, tlsAddr+"/e2e/upstream-only:1"); got != "from the registry" {
			t.Fatalf("image content %q, want the registry's", got)
		}
	})
	t.Run("client certificate", func(t *testing.T) {
		if got := marker(t, mtlsAddr+"/e2e/upstream-only:1"); got != "from the registry" {
			t.Fatalf("image content %q", got)
		}
	})
	t.Run("errors", func(t *testing.T) {
		ctx := ctxT(t)
		_, err := bare.PullImage(ctx, &runtimeapi.ImageSpec{Image: tlsAddr + "/e2e/upstream-only:1"}, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Errorf("pull without the CA: %v, want an unknown-authority TLS error", err)
		}
		_, err = bare.PullImage(ctx, &runtimeapi.ImageSpec{Image: mtlsAddr + "/e2e/upstream-only:1"}, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("pull without a client certificate: %v, want a TLS certificate error", err)
		}
		_, err = rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: brokenAddr + "/e2e/any:1"}, nil, nil)
		want := filepath.Join(hosts, "127.0.0.1_5445_", "hosts.toml")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("pull with a malformed hosts.toml: %v, want an error naming %s", err, want)
		}
	})
}

// builtinWith starts a built-in runtime of the test's own with its configuration changed by edit.
func builtinWith(t *testing.T, edit func(*runtime.Config)) *runtime.Runtime {
	t.Helper()
	cfg := builtinConfig(t.TempDir(), cniConfDir)
	edit(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := runtime.New(ctx, cfg)
	if err != nil {
		t.Fatalf("start built-in runtime: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// runCat runs `cat path` in image on backend b and returns what it printed.
func runCat(t *testing.T, b backend, image, path string) string {
	t.Helper()
	p := runPod(t, b, "cat-"+strings.NewReplacer("/", "-", ":", "-", ".", "-").Replace(image), nil)
	cfg := containerConfig("cat", "cat", path)
	cfg.Image.Image = image
	id := p.start(t, cfg)
	if st := waitExited(t, b, id, 30*time.Second); st.ExitCode != 0 {
		t.Fatalf("cat %s in %s exited %d", path, image, st.ExitCode)
	}
	var out string
	eventually(t, 10*time.Second, "the container's output in its log", func() error {
		if out = strings.Join(readLogLines(t, filepath.Join(p.cfg.LogDirectory, "cat", "0.log")), "\n"); out == "" {
			return fmt.Errorf("empty log")
		}
		return nil
	})
	return out
}
