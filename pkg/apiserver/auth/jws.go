package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodeagent/kubelet/internal/atomicfile"
)

// ServiceAccountKeyFile is the name of the generated service-account signing
// key inside a PKI directory, as kubeadm names it.
const ServiceAccountKeyFile = "sa.key"

// SigningKey signs and verifies compact JWS tokens (RFC 7515) with RS256 or
// ES256, as kube-apiserver signs service account tokens. It is immutable and
// safe for concurrent use.
type SigningKey struct {
	priv crypto.Signer // nil for a verification-only key
	pub  crypto.PublicKey
	alg  string
	kid  string
}

// Algorithm returns the JWS algorithm: "RS256" or "ES256".
func (k *SigningKey) Algorithm() string { return k.alg }

// KeyID returns the key's "kid", as kube-apiserver derives it: the unpadded
// base64url SHA-256 of the public key's PKIX DER form.
func (k *SigningKey) KeyID() string { return k.kid }

// NewSigningKey returns the SigningKey of an RSA or P-256 ECDSA private key.
func NewSigningKey(priv crypto.Signer) (*SigningKey, error) {
	var alg string
	switch p := priv.Public().(type) {
	case *rsa.PublicKey:
		if p.N.BitLen() < 2048 {
			return nil, fmt.Errorf("RSA signing key of %d bits: at least 2048 are needed", p.N.BitLen())
		}
		alg = "RS256"
	case *ecdsa.PublicKey:
		if p.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA signing key on curve %s: only P-256 is supported", p.Curve.Params().Name)
		}
		alg = "ES256"
	default:
		return nil, fmt.Errorf("unsupported signing key type %T", priv.Public())
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return &SigningKey{priv: priv, pub: priv.Public(), alg: alg, kid: base64.RawURLEncoding.EncodeToString(sum[:])}, nil
}

// LoadOrCreateSigningKey loads the PEM private key at path (PKCS#1 or PKCS#8
// RSA, SEC 1 or PKCS#8 ECDSA), generating a P-256 key there (mode 0600,
// written atomically) when the file does not exist.
func LoadOrCreateSigningKey(path string) (*SigningKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key, gerr := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if gerr != nil {
			return nil, fmt.Errorf("generate service account signing key: %w", gerr)
		}
		keyPEM, gerr := encodeKey(key)
		if gerr != nil {
			return nil, gerr
		}
		if gerr := os.MkdirAll(filepath.Dir(path), 0o700); gerr != nil {
			return nil, fmt.Errorf("create %s: %w", filepath.Dir(path), gerr)
		}
		if gerr := atomicfile.Write(path, keyPEM, 0o600); gerr != nil {
			return nil, gerr
		}
		return NewSigningKey(key)
	}
	if err != nil {
		return nil, fmt.Errorf("read service account signing key: %w", err)
	}
	priv, err := parsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("service account signing key %s: %w", path, err)
	}
	return NewSigningKey(priv)
}

// parsePrivateKey decodes the first private key block of a PEM file.
func parsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no private key in PEM data")
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", block.Type, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		return signer, nil
	}
}

// jwsHeader is the protected header of the tokens this server signs.
type jwsHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid,omitempty"`
}

// errMalformedJWS means a string is not a compact JWS this server could have signed.
var errMalformedJWS = errors.New("malformed token")

// Sign returns the compact JWS of claims (marshalled to JSON).
func (k *SigningKey) Sign(claims any) (string, error) {
	if k.priv == nil {
		return "", errors.New("signing key has no private part")
	}
	header, err := json.Marshal(jwsHeader{Alg: k.alg, Kid: k.kid})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode token claims: %w", err)
	}
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	switch k.alg {
	case "RS256":
		sig, err = rsa.SignPKCS1v15(rand.Reader, k.priv.(*rsa.PrivateKey), crypto.SHA256, digest[:])
	case "ES256":
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, k.priv.(*ecdsa.PrivateKey), digest[:])
		if err == nil {
			sig = make([]byte, 64) // r and s, each left-padded to 32 bytes (RFC 7518 3.4)
			r.FillBytes(sig[:32])
			s.FillBytes(sig[32:])
		}
	}
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// unverifiedPayload returns the decoded payload of a compact JWS without
// checking its signature, or errMalformedJWS.
func unverifiedPayload(token string) ([]byte, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errMalformedJWS
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, errMalformedJWS
	}
	return payload, nil
}

// Verify checks token's signature with the key and returns its payload. A
// token whose header names another algorithm or key ID, or whose signature
// does not verify, is refused.
func (k *SigningKey) Verify(token string) ([]byte, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errMalformedJWS
	}
	rawHeader, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, errMalformedJWS
	}
	var h jwsHeader
	dec := json.NewDecoder(bytes.NewReader(rawHeader))
	if err := dec.Decode(&h); err != nil {
		return nil, errMalformedJWS
	}
	if h.Alg != k.alg {
		return nil, fmt.Errorf("invalid signature: unexpected algorithm %q", h.Alg)
	}
	if h.Kid != "" && h.Kid != k.kid {
		return nil, errors.New("invalid signature, no keys found")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, errMalformedJWS
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	ok := false
	switch pub := k.pub.(type) {
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) == nil
	case *ecdsa.PublicKey:
		if len(sig) == 64 {
			ok = ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
		}
	}
	if !ok {
		return nil, errors.New("invalid signature: the token was not signed by this server's key")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, errMalformedJWS
	}
	return payload, nil
}
