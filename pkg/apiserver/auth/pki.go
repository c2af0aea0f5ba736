package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nodeagent/kubelet/internal/atomicfile"
)

// CA is a certificate authority that signs serving and client certificates.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
}

// PKI file names inside a PKI directory.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "apiserver.crt"
	ServingKeyFile  = "apiserver.key"
)

// LoadOrCreateCA loads the CA from certFile and keyFile, generating both when
// neither exists.
func LoadOrCreateCA(certFile, keyFile string, now time.Time) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if errors.Is(err, os.ErrNotExist) {
		if _, kerr := os.Stat(keyFile); kerr == nil {
			return nil, fmt.Errorf("CA key %s exists without its certificate %s", keyFile, certFile)
		}
		return createCA(certFile, keyFile, now)
	}
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA %s: %w", certFile, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key %s cannot sign", keyFile)
	}
	return &CA{Cert: cert, CertPEM: certPEM, key: signer}, nil
}

func createCA(certFile, keyFile string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "nodeagent-apiserver-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := writeFiles(certFile, certPEM, keyFile, keyPEM); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: certPEM, key: key}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// writeFiles writes a key (mode 0600) and its certificate (0644), each
// atomically, the key first: a certificate on disk always has its key.
func writeFiles(certFile string, certPEM []byte, keyFile string, keyPEM []byte) error {
	for _, f := range []string{certFile, keyFile} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return err
		}
	}
	if err := atomicfile.Write(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.Write(certFile, certPEM, 0o644)
}

// Issue returns a PEM certificate and key signed by the CA. A client
// certificate carries user as its common name and groups as organizations; a
// serving certificate (hosts non-empty) carries hosts as names.
func (ca *CA) Issue(user string, groups []string, hosts []string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if ca.key == nil {
		return nil, nil, errors.New("CA has no key")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for %q: %w", user, err)
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// LoadOrCreateServing loads the serving pair from certFile and keyFile, or
// issues one for hosts from ca when they do not exist.
func LoadOrCreateServing(ca *CA, certFile, keyFile string, hosts []string, now time.Time) (tls.Certificate, error) {
	if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
		certPEM, keyPEM, err := ca.Issue("nodeagent-apiserver", nil, hosts, now, 10*365*24*time.Hour)
		if err != nil {
			return tls.Certificate{}, err
		}
		if err := writeFiles(certFile, certPEM, keyFile, keyPEM); err != nil {
			return tls.Certificate{}, err
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load serving certificate: %w", err)
	}
	return pair, nil
}
