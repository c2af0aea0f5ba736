package auth

import (
	"context"
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

// TokenAuthenticator authenticates bearer tokens of one kind (the static token
// file; service-account tokens later). Implementations are safe for
// concurrent use.
type TokenAuthenticator interface {
	// AuthenticateToken returns the token's user and true when the token is
	// one of its kind and valid; false (and no error) when it does not know the
	// token; an error when it knows the token but cannot accept it.
	AuthenticateToken(ctx context.Context, token string) (*request.User, bool, error)
}

// Tokens is a TokenAuthenticator trying each of its members in order.
type Tokens []TokenAuthenticator

var _ TokenAuthenticator = Tokens(nil)

// AuthenticateToken implements TokenAuthenticator: the first member that
// knows the token decides.
func (ts Tokens) AuthenticateToken(ctx context.Context, token string) (*request.User, bool, error) {
	for _, t := range ts {
		if u, ok, err := t.AuthenticateToken(ctx, token); ok || err != nil {
			return u, ok, err
		}
	}
	return nil, false, nil
}

// StaticTokens authenticates the tokens of a static token file. It is
// immutable and safe for concurrent use.
type StaticTokens map[string]*request.User

var _ TokenAuthenticator = StaticTokens(nil)

// AuthenticateToken implements TokenAuthenticator, comparing in constant time.
func (st StaticTokens) AuthenticateToken(_ context.Context, token string) (*request.User, bool, error) {
	found := (*request.User)(nil)
	for known, u := range st {
		if subtle.ConstantTimeCompare([]byte(known), []byte(token)) == 1 {
			found = u
		}
	}
	if found == nil {
		return nil, false, nil
	}
	c := *found
	c.Groups = append([]string(nil), found.Groups...)
	return &c, true, nil
}

// Authenticator identifies the user of a request by bearer token or by a
// client certificate the TLS layer verified against the CA. It is immutable
// and safe for concurrent use.
type Authenticator struct {
	tokens TokenAuthenticator
}

// NewAuthenticator returns an Authenticator accepting the tokens tokens
// authenticates.
func NewAuthenticator(tokens TokenAuthenticator) *Authenticator {
	return &Authenticator{tokens: tokens}
}

// Authenticate returns the request's user, or an error wrapping
// ErrUnauthenticated.
func (a *Authenticator) Authenticate(r *http.Request) (*request.User, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		tok = strings.TrimSpace(tok)
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return nil, ErrUnauthenticated
		}
		u, ok, err := a.tokens.AuthenticateToken(r.Context(), tok)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
		}
		if !ok {
			return nil, ErrUnauthenticated
		}
		return u, nil
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
func LoadTokenFile(path string) (StaticTokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open token file: %w", err)
	}
	defer f.Close()
	return ParseTokens(f)
}

// ParseTokens parses the token file format of LoadTokenFile.
func ParseTokens(r io.Reader) (StaticTokens, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	out := StaticTokens{}
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
