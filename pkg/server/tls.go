package server

import (
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

// Files of the self-signed serving certificate, under <root dir>/pki, as upstream names them.
const (
	selfSignedCertFile = "kubelet.crt"
	selfSignedKeyFile  = "kubelet.key"
	selfSignedValidity = 365 * 24 * time.Hour
)

// servingCertificate loads the given pair, or the self-signed pair in dir (made now, for hosts, when it is
// missing or expired).
func servingCertificate(certFile, keyFile, dir string, hosts []string, now time.Time) (tls.Certificate, error) {
	if certFile != "" || keyFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return c, fmt.Errorf("load serving certificate: %w", err)
		}
		return c, nil
	}
	certFile, keyFile = filepath.Join(dir, selfSignedCertFile), filepath.Join(dir, selfSignedKeyFile)
	if c, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil && c.Leaf != nil && now.Before(c.Leaf.NotAfter) && !c.Leaf.IsCA {
		if err := os.Chmod(keyFile, 0o600); err != nil { // a key written by an earlier version may be wider
			return tls.Certificate{}, fmt.Errorf("restrict serving key: %w", err)
		}
		return c, nil
	}
	certPEM, keyPEM, err := selfSigned(hosts, now)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("create pki dir: %w", err)
	}
	if err := atomicfile.Write(keyFile, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, fmt.Errorf("write serving key: %w", err)
	}
	if err := atomicfile.Write(certFile, certPEM, 0o644); err != nil {
		return tls.Certificate{}, fmt.Errorf("write serving certificate: %w", err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// selfSigned makes a self-signed serving certificate for hosts (names and addresses), valid from now.
func selfSigned(hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("serial: %w", err)
	}
	cn := "kubelet"
	if len(hosts) > 0 {
		cn = hosts[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", cn, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  false, // a serving certificate signs nothing: pinning it must not make it a CA
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// caPool parses a PEM bundle of CA certificates.
func caPool(bundle []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, errors.New("client CA bundle holds no PEM certificate")
	}
	return pool, nil
}
