package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/nodeagent/kubelet/internal/freeport"
)

// defaultKubeAPIServer is where hack/kube-binaries.sh puts kube-apiserver.
const defaultKubeAPIServer = "/var/lib/nodeagent/bin/kube-apiserver"

// kubeControlPlane is Debian's etcd and an upstream kube-apiserver started on loopback for the benchmark's
// reference run, in a temporary directory of their own, with certificates made here.
type kubeControlPlane struct {
	dir             string
	etcd, apiserver *proc
	config          *rest.Config // admin: a client certificate in system:masters
}

func (cp *kubeControlPlane) pids() []int {
	return []int{cp.apiserver.cmd.Process.Pid, cp.etcd.cmd.Process.Pid}
}

// proc is a child process; done is closed once it has exited and been reaped.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startKubeControlPlane starts etcd (installing Debian's etcd-server through hack/etcd.sh when it is missing)
// and kube-apiserver, and waits until kube-apiserver is ready.
func startKubeControlPlane(ctx context.Context, kubeBin string) (_ *kubeControlPlane, retErr error) {
	etcdBin, err := findEtcd(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kube-apiserver-bench-")
	if err != nil {
		return nil, err
	}
	cp := &kubeControlPlane{dir: dir}
	defer func() {
		if retErr != nil {
			cp.stop()
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cp.etcd, err = startLogged(filepath.Join(dir, "etcd.log"), etcdBin,
		"--name", "bench", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "bench="+peerURL, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stderr",
		// As kubeadm sets it: kube-apiserver's watch cache learns from these that it is up to date (Debian's
		// etcd 3.4.23 cannot be asked for one), without which a watch from "now" on an idle resource fails.
		"--experimental-watch-progress-notify-interval", "5s")
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 30*time.Second, "etcd", func() bool {
		if cp.etcd.exited() {
			return false
		}
		resp, err := http.Get(clientURL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		return nil, err
	}

	pki, err := writePKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	p := func(name string) string { return filepath.Join(dir, "pki", name) }
	cp.apiserver, err = startLogged(filepath.Join(dir, "kube-apiserver.log"), kubeBin,
		"--etcd-servers", clientURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[2]),
		"--tls-cert-file", p("serving.crt"), "--tls-private-key-file", p("serving.key"),
		"--client-ca-file", p("ca.crt"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", p("sa.pub"), "--service-account-signing-key-file", p("sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--authorization-mode", "Node,RBAC")
	if err != nil {
		return nil, err
	}
	cp.config = &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", ports[2]),
		TLSClientConfig: rest.TLSClientConfig{CAData: pki.caPEM, CertData: pki.adminCert, KeyData: pki.adminKey}}
	hc, err := rest.HTTPClientFor(cp.config)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 3*time.Minute, "kube-apiserver", func() bool {
		if cp.apiserver.exited() {
			return false
		}
		resp, err := hc.Get(cp.config.Host + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		return nil, fmt.Errorf("%w (log: %s)", err, filepath.Join(dir, "kube-apiserver.log"))
	}
	return cp, nil
}

// stop ends kube-apiserver, then etcd, by their PIDs, and removes their directory.
func (cp *kubeControlPlane) stop() {
	for _, p := range []*proc{cp.apiserver, cp.etcd} {
		if p == nil {
			continue
		}
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	cp.apiserver, cp.etcd = nil, nil
	_ = os.RemoveAll(cp.dir)
}

// findEtcd returns Debian's etcd, installing the package etcd-server through hack/etcd.sh when it is missing.
func findEtcd(ctx context.Context) (string, error) {
	if path, err := exec.LookPath("etcd"); err == nil {
		return path, nil
	}
	out, err := exec.CommandContext(ctx, "hack/etcd.sh").Output()
	if err != nil {
		return "", fmt.Errorf("etcd is missing and hack/etcd.sh failed (run from the repository root, as root): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// startLogged starts a command with its output in logPath.
func startLogged(logPath, bin string, args ...string) (*proc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func waitFor(ctx context.Context, timeout time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var out []int
	for i := 0; i < n; i++ {
		port, err := freeport.Pick()
		if err != nil {
			return nil, err
		}
		out = append(out, port)
	}
	return out, nil
}

// benchPKI holds what the client needs: the CA, and the admin's certificate and key, PEM-encoded.
type benchPKI struct{ caPEM, adminCert, adminKey []byte }

// writePKI writes into dir a CA, a serving certificate for 127.0.0.1 and localhost, and a service account
// key pair, and returns the CA and an admin client certificate in system:masters.
func writePKI(dir string) (*benchPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = big.NewInt(serial), now.Add(-time.Hour), now.Add(24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
	}
	servingCert, servingKey, err := issue(2, &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default.svc"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}})
	if err != nil {
		return nil, err
	}
	adminCert, adminKey, err := issue(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "bench-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for name, data := range map[string][]byte{
		"ca.crt": caPEM, "serving.crt": servingCert, "serving.key": servingKey,
		"sa.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}),
		"sa.pub": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return &benchPKI{caPEM: caPEM, adminCert: adminCert, adminKey: adminKey}, nil
}
