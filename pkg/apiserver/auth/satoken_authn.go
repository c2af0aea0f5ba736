package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// ServiceAccounts issues the server's service account tokens (JWTs signed
// with its key, with kube-apiserver's claims) and authenticates them: the
// signature, the issuer, the audiences, the times, and that the service
// account and the object the token is bound to still exist. It is immutable
// and safe for concurrent use.
type ServiceAccounts struct {
	key       *SigningKey
	issuer    string
	audiences []string
	objects   ObjectGetter
	clock     clock.PassiveClock
	newID     func() string
}

var (
	_ TokenAuthenticator = (*ServiceAccounts)(nil)
	_ rest.TokenIssuer   = (*ServiceAccounts)(nil)
)

// NewServiceAccounts returns the issuer and authenticator of tokens signed
// with key for issuer. audiences are the server's own (kube-apiserver's
// --api-audiences): a token without audiences is valid for them. objects
// reads the service accounts and bound objects; clock tells the time.
func NewServiceAccounts(key *SigningKey, issuer string, audiences []string, objects ObjectGetter, clk clock.PassiveClock) *ServiceAccounts {
	return &ServiceAccounts{key: key, issuer: issuer, audiences: append([]string(nil), audiences...), objects: objects,
		clock: clk, newID: func() string { return string(uuid.NewUUID()) }}
}

// Audiences returns the server's audiences.
func (s *ServiceAccounts) Audiences() []string { return append([]string(nil), s.audiences...) }

// IssueToken returns a token for subj, for audiences, valid for expiration
// from now.
func (s *ServiceAccounts) IssueToken(subj rest.TokenSubject, audiences []string, now time.Time, expiration time.Duration) (string, error) {
	c, err := newTokenClaims(s.issuer, subj, audiences, now, expiration, s.newID())
	if err != nil {
		return "", err
	}
	return s.key.Sign(c)
}

// AuthenticateToken implements TokenAuthenticator, as kube-apiserver's
// service account token authenticator: a token of another issuer (or no JWT
// at all) is not known; a token of this issuer is accepted when its
// signature verifies, its audiences (the server's when it has none) meet
// those asked for (the server's when ctx asks for none), and its claims
// validate.
func (s *ServiceAccounts) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	payload, err := unverifiedPayload(token)
	if err != nil {
		return nil, false, nil
	}
	var peek struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(payload, &peek) != nil || peek.Issuer != s.issuer {
		return nil, false, nil
	}
	if payload, err = s.key.Verify(token); err != nil {
		if errors.Is(err, errMalformedJWS) {
			return nil, false, nil
		}
		return nil, false, err
	}
	var c tokenClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, false, fmt.Errorf("service account token claims: %w", err)
	}
	tokenAuds := []string(c.Audience)
	if len(tokenAuds) == 0 {
		tokenAuds = s.audiences
	}
	want, asked := AudiencesFrom(ctx)
	if !asked {
		want = s.audiences
	}
	auds := intersect(tokenAuds, want)
	if len(auds) == 0 && len(s.audiences) != 0 {
		return nil, false, fmt.Errorf("token audiences %q is invalid for the target audiences %q", tokenAuds, want)
	}
	info, err := validateTokenClaims(&c, s.clock.Now(), s.objects)
	if err != nil {
		return nil, false, err
	}
	return &Response{User: info.user(), Audiences: auds}, true, nil
}
