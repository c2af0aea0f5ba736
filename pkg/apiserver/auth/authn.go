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

// Well-known groups and users.
const (
	GroupMasters         = "system:masters"
	GroupNodes           = "system:nodes"
	GroupAuthenticated   = "system:authenticated"
	GroupUnauthenticated = "system:unauthenticated"
	NodeUserPrefix       = "system:node:"
	AnonymousUser        = "system:anonymous"
)

// ErrUnauthenticated means the request carried no credentials, or bad ones.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrNoCredentials is wrapped (with ErrUnauthenticated) when a request
// carried no credentials at all.
var ErrNoCredentials = errors.New("no credentials")

// Anonymous returns the identity of a request without credentials, as
// kube-apiserver's anonymous authenticator names it.
func Anonymous() *request.User {
	return &request.User{Name: AnonymousUser, Groups: []string{GroupUnauthenticated}}
}

// Response is a successful token authentication: the token's user, and the
// audiences asked for (see WithAudiences) that the token is valid for.
type Response struct {
	User      *request.User
	Audiences []string
}

// TokenAuthenticator authenticates bearer tokens of one kind (the static token
// file, service account tokens). Implementations are safe for concurrent use.
type TokenAuthenticator interface {
	// AuthenticateToken returns the token's user and true when the token is
	// one of its kind and valid for the audiences in ctx (WithAudiences);
	// false (and no error) when it does not know the token; an error when it
	// knows the token but cannot accept it.
	AuthenticateToken(ctx context.Context, token string) (*Response, bool, error)
}

type audiencesKey struct{}

// WithAudiences returns ctx asking token authenticators for a token valid
// for one of auds.
func WithAudiences(ctx context.Context, auds []string) context.Context {
	return context.WithValue(ctx, audiencesKey{}, auds)
}

// AudiencesFrom returns the audiences ctx asks for, and whether it asks.
func AudiencesFrom(ctx context.Context) ([]string, bool) {
	a, ok := ctx.Value(audiencesKey{}).([]string)
	return a, ok
}

// intersect returns the members of a also in b, in a's order.
func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			if x == y {
				out = append(out, x)
				break
			}
		}
	}
	return out
}

// Tokens is a TokenAuthenticator trying each of its members in order.
type Tokens []TokenAuthenticator

var _ TokenAuthenticator = Tokens(nil)

// AuthenticateToken implements TokenAuthenticator: the first member that
// knows the token decides.
func (ts Tokens) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	for _, t := range ts {
		if r, ok, err := t.AuthenticateToken(ctx, token); ok || err != nil {
			return r, ok, err
		}
	}
	return nil, false, nil
}

// StaticTokens authenticates the tokens of a static token file. It is
// immutable and safe for concurrent use. Its tokens are bound to no audience:
// wrap it in AudienceAgnostic.
type StaticTokens map[string]*request.User

var _ TokenAuthenticator = StaticTokens(nil)

// AuthenticateToken implements TokenAuthenticator, comparing in constant time.
func (st StaticTokens) AuthenticateToken(_ context.Context, token string) (*Response, bool, error) {
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
	return &Response{User: &c}, true, nil
}

// AudienceAgnostic makes the tokens of an authenticator that knows no
// audiences valid for the server's own audiences only, as kube-apiserver
// treats its static tokens: a request for other audiences does not know them.
type AudienceAgnostic struct {
	// Implicit are the server's audiences (its API audiences).
	Implicit []string
	Tokens   TokenAuthenticator
}

var _ TokenAuthenticator = AudienceAgnostic{}

// AuthenticateToken implements TokenAuthenticator.
func (a AudienceAgnostic) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	want, asked := AudiencesFrom(ctx)
	if !asked {
		return a.Tokens.AuthenticateToken(ctx, token)
	}
	auds := intersect(a.Implicit, want)
	if len(auds) == 0 {
		return nil, false, nil
	}
	r, ok, err := a.Tokens.AuthenticateToken(ctx, token)
	if r != nil {
		r.Audiences = auds
	}
	return r, ok, err
}

// Authenticator identifies the user of a request by bearer token (valid for
// the server's audiences) or by a client certificate the TLS layer verified
// against the CA. It is immutable and safe for concurrent use.
type Authenticator struct {
	tokens    TokenAuthenticator
	audiences []string
}

// NewAuthenticator returns an Authenticator accepting the tokens tokens
// authenticates for audiences (the server's API audiences).
func NewAuthenticator(tokens TokenAuthenticator, audiences []string) *Authenticator {
	return &Authenticator{tokens: tokens, audiences: audiences}
}

// Authenticate returns the request's user, or an error wrapping
// ErrUnauthenticated (and ErrNoCredentials when the request had none).
func (a *Authenticator) Authenticate(r *http.Request) (*request.User, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		tok = strings.TrimSpace(tok)
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || a.tokens == nil {
			return nil, ErrUnauthenticated
		}
		ctx := r.Context()
		if len(a.audiences) > 0 {
			ctx = WithAudiences(ctx, a.audiences)
		}
		resp, ok, err := a.tokens.AuthenticateToken(ctx, tok)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
		}
		if !ok {
			return nil, ErrUnauthenticated
		}
		return resp.User, nil
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		c := r.TLS.PeerCertificates[0]
		if c.Subject.CommonName == "" {
			return nil, ErrUnauthenticated
		}
		groups := append(append([]string{}, c.Subject.Organization...), GroupAuthenticated)
		return &request.User{Name: c.Subject.CommonName, Groups: groups}, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrUnauthenticated, ErrNoCredentials)
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
