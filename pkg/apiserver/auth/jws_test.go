package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testKey(t *testing.T, rsaKey bool) *SigningKey {
	t.Helper()
	var k *SigningKey
	var err error
	if rsaKey {
		priv, gerr := rsa.GenerateKey(rand.Reader, 2048)
		if gerr != nil {
			t.Fatal(gerr)
		}
		k, err = NewSigningKey(priv)
	} else {
		priv, gerr := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if gerr != nil {
			t.Fatal(gerr)
		}
		k, err = NewSigningKey(priv)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Tokens are compact JWS with kube-apiserver's header (alg, kid); a token verifies only with the key that
// signed it and only untouched.
func TestJWSSignVerify(t *testing.T) {
	for _, rsaKey := range []bool{false, true} {
		k, other := testKey(t, rsaKey), testKey(t, rsaKey)
		tok, err := k.Sign(map[string]string{"iss": "me"})
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(tok, ".")
		if len(parts) != 3 {
			t.Fatalf("not a compact JWS: %q", tok)
		}
		hdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
		var h map[string]string
		if err := json.Unmarshal(hdr, &h); err != nil || h["alg"] != k.Algorithm() || h["kid"] != k.KeyID() || len(h) != 2 {
			t.Fatalf("header %s: %v", hdr, err)
		}
		if payload, err := k.Verify(tok); err != nil || string(payload) != `{"iss":"me"}` {
			t.Fatalf("%s: verify: %q, %v", k.Algorithm(), payload, err)
		}
		tamperedPayload := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"you"}`)) + "." + parts[2]
		noKid, _ := json.Marshal(map[string]string{"alg": k.Algorithm()})
		otherKid, _ := json.Marshal(map[string]string{"alg": k.Algorithm(), "kid": "x"})
		none, _ := json.Marshal(map[string]string{"alg": "none"})
		for name, bad := range map[string]string{
			"tampered payload":  tamperedPayload,
			"no signature":      parts[0] + "." + parts[1] + ".",
			"alg none":          base64.RawURLEncoding.EncodeToString(none) + "." + parts[1] + ".",
			"another key's kid": base64.RawURLEncoding.EncodeToString(otherKid) + "." + parts[1] + "." + parts[2],
			"two parts":         parts[0] + "." + parts[1],
			"not base64":        parts[0] + ".!!!." + parts[2],
		} {
			if _, err := k.Verify(bad); err == nil {
				t.Errorf("%s: %s verified", k.Algorithm(), name)
			}
		}
		// The header without a kid still names the key's algorithm: the signature decides.
		if _, err := k.Verify(base64.RawURLEncoding.EncodeToString(noKid) + "." + parts[1] + "." + parts[2]); err == nil {
			t.Errorf("%s: a re-headed token verified", k.Algorithm())
		}
		if _, err := other.Verify(tok); err == nil {
			t.Errorf("%s: verified with another key", k.Algorithm())
		}
	}
}

// The key is generated once (P-256, mode 0600) and loaded the next time; an RSA key in PKCS#1 or PKCS#8 is
// loaded for RS256; a small RSA key or garbage is refused.
func TestLoadOrCreateSigningKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pki", ServiceAccountKeyFile)
	k1, err := LoadOrCreateSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	k2, err := LoadOrCreateSigningKey(path)
	if err != nil || k2.KeyID() != k1.KeyID() || k1.Algorithm() != "ES256" {
		t.Fatalf("reload: %v %q %q %q", err, k1.KeyID(), k2.KeyID(), k1.Algorithm())
	}
	priv, _ := rsa.GenerateKey(rand.Reader, 2048)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(priv)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	for name, tc := range map[string]struct {
		pem string
		alg string // "" when refused
	}{
		"rsa pkcs1": {string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(priv)})), "RS256"},
		"rsa pkcs8": {string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})), "RS256"},
		"rsa 1024":  {string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)})), ""},
		"garbage":   {"not a key", ""},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".key")
		if err := os.WriteFile(p, []byte(tc.pem), 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := LoadOrCreateSigningKey(p)
		switch {
		case tc.alg == "" && err == nil:
			t.Errorf("%s: loaded", name)
		case tc.alg != "" && (err != nil || k.Algorithm() != tc.alg):
			t.Errorf("%s: %v", name, err)
		}
	}
}
