package auth

import (
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
)

// Well-known groups.
const (
	GroupMasters       = "system:masters"
	GroupNodes         = "system:nodes"
	GroupAuthenticated = "system:authenticated"
	NodeUserPrefix     = "system:node:"
)

// ErrUnauthenticated means the request carried no credentials, or bad ones.
var ErrUnauthenticated = errors.New("unauthenticated")

// Authenticator identifies the user of a request by bearer token or by a
// client certificate the TLS layer verified against the CA. It is immutable
// and safe for concurrent use.
type Authenticator struct {
	tokens map[string]*request.User
}

// NewAuthenticator returns an Authenticator accepting the given tokens.
func NewAuthenticator(tokens map[string]*request.User) *Authenticator {
	return &Authenticator{tokens: tokens}
}

// Authenticate returns the request's user, or ErrUnauthenticated.
func (a *Authenticator) Authenticate(r *http.Request) (*request.User, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return nil, ErrUnauthenticated
		}
		for known, u := range a.tokens {
			if subtle.ConstantTimeCompare([]byte(known), []byte(strings.TrimSpace(tok))) == 1 {
				return u, nil
			}
		}
		return nil, ErrUnauthenticated
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		c := r.TLS.PeerCertificates[0]
		if c.Subject.CommonName == "" {
			return nil, ErrUnauthenticated
		}
		groups := append(append([]string{}, c.Subject.Organization...), GroupAuthenticated)
		return &request.User{Name: c.Subject.CommonName, Groups: groups}, nil
	}
	return nil, ErrUnauthenticated
}

// LoadTokenFile reads a static token file in upstream's format: one
// token,user,uid[,"group1,group2"] per line.
func LoadTokenFile(path string) (map[string]*request.User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open token file: %w", err)
	}
	defer f.Close()
	return ParseTokens(f)
}

// ParseTokens parses the token file format of LoadTokenFile.
func ParseTokens(r io.Reader) (map[string]*request.User, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	out := map[string]*request.User{}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("token file line %d: %w", line, err)
		}
		if len(rec) < 3 || rec[0] == "" || rec[1] == "" {
			return nil, fmt.Errorf("token file line %d: want token,user,uid[,groups]", line)
		}
		u := &request.User{Name: rec[1], UID: rec[2]}
		if len(rec) > 3 && rec[3] != "" {
			for _, g := range strings.Split(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		u.Groups = append(u.Groups, GroupAuthenticated)
		if _, dup := out[rec[0]]; dup {
			return nil, fmt.Errorf("token file line %d: duplicate token", line)
		}
		out[rec[0]] = u
	}
}
