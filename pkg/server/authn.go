package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// TokenReviewer asks the API server who a bearer token belongs to (authentication.k8s.io/v1 TokenReview).
type TokenReviewer interface {
	Create(ctx context.Context, review *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

const (
	// tokenCacheTTL is how long a token review's answer is kept, either way: upstream's
	// --authentication-token-webhook-cache-ttl, which its kubelet applies to denials as well (the delegating
	// authenticator's cache.New(tokenAuth, false, ttl, ttl)). A review that fails is not kept.
	tokenCacheTTL = 2 * time.Minute
	// reviewCacheSize bounds each cache of review answers.
	reviewCacheSize = 4096
	// reviewTimeout bounds one review request to the API server.
	reviewTimeout = 10 * time.Second
	// maxConcurrentTokenReviews bounds the token reviews in flight to the API server: a flood of distinct
	// tokens, each unknown to the caches, costs the API server this many requests at a time, not one per
	// caller.
	maxConcurrentTokenReviews = 8
	// tokenReviewWait is how long a caller waits for a review slot before it is told to retry (429).
	tokenReviewWait = time.Second
)

// errTooManyReviews is the refusal of a caller whose token could not be reviewed within tokenReviewWait:
// the reviews in flight are at their bound.
var errTooManyReviews = errors.New("too many token reviews in flight")

// groupAuthenticated is the group of every authenticated user.
const groupAuthenticated = "system:authenticated"

// user is an authenticated caller.
type user struct {
	name   string
	uid    string
	groups []string
	extra  map[string][]string
}

func (u user) inGroup(g string) bool { return slices.Contains(u.groups, g) }

// errNoCredentials is the failure of a caller that presented neither a client certificate nor a bearer token.
var errNoCredentials = errors.New("no client certificate or bearer token")

// authenticator identifies callers of the endpoint as upstream's kubelet does: by a client certificate of the
// client CA (user: its common name, groups: its organizations), else by a bearer token that the API server
// vouches for through a TokenReview (answers cached for tokenCacheTTL). Denials are kept apart from the
// tokens that authenticated, so that many junk tokens cannot push a good one out; callers presenting the same
// token at once share one review; at most maxConcurrentTokenReviews are in flight. Safe for concurrent use.
type authenticator struct {
	roots    *x509.CertPool // nil: client certificates are not accepted
	tokens   TokenReviewer  // nil: bearer tokens are refused
	clock    clock.PassiveClock
	cache    *ttlCache[tokenAnswer] // tokens that authenticated
	denied   *ttlCache[tokenAnswer] // tokens the API server refused
	inflight singleflight.Group
	slots    chan struct{}
	wait     time.Duration
}

// tokenAnswer is a token review's answer: the user, or the reason the token was refused.
type tokenAnswer struct {
	user   user
	reason string
}

func newAuthenticator(roots *x509.CertPool, tokens TokenReviewer, clk clock.PassiveClock) *authenticator {
	return &authenticator{roots: roots, tokens: tokens, clock: clk, cache: newTTLCache[tokenAnswer](clk, reviewCacheSize),
		denied: newTTLCache[tokenAnswer](clk, reviewCacheSize), slots: make(chan struct{}, maxConcurrentTokenReviews),
		wait: tokenReviewWait}
}

// authenticate returns the caller of r. A client certificate that does not verify is refused outright, as is
// a token the API server does not vouch for; an API server that cannot be asked is an error too.
func (a *authenticator) authenticate(r *http.Request) (user, error) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && a.roots != nil {
		return verifyClientCert(r.TLS.PeerCertificates, a.roots, a.clock.Now())
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			return user{}, errors.New("authorization header is not a bearer token")
		}
		return a.reviewToken(r.Context(), token)
	}
	return user{}, errNoCredentials
}

// reviewToken asks the API server who token belongs to, or answers from the cache.
func (a *authenticator) reviewToken(ctx context.Context, token string) (user, error) {
	if a.tokens == nil {
		return user{}, errors.New("bearer tokens are not accepted: the kubelet has no API server to review them")
	}
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if ans, ok := a.cache.get(key); ok {
		return ans.user, ans.err()
	}
	if ans, ok := a.denied.get(key); ok {
		return ans.user, ans.err()
	}
	// The callers of one token share its review; the review runs on its own context (bounded by
	// reviewTimeout), so that the first caller leaving does not fail the others.
	v, err, _ := a.inflight.Do(key, func() (any, error) {
		timer := time.NewTimer(a.wait)
		defer timer.Stop()
		select {
		case a.slots <- struct{}{}:
			defer func() { <-a.slots }()
		case <-timer.C:
			return nil, errTooManyReviews
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		out, err := a.tokens.Create(rctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("token review: %w", err)
		}
		ans := tokenReviewAnswer(out.Status)
		if ans.reason != "" {
			a.denied.set(key, ans, tokenCacheTTL)
		} else {
			a.cache.set(key, ans, tokenCacheTTL)
		}
		return ans, nil
	})
	if err != nil {
		return user{}, err
	}
	ans := v.(tokenAnswer)
	return ans.user, ans.err()
}

// tokenReviewAnswer reads a TokenReview's status.
func tokenReviewAnswer(st authenticationv1.TokenReviewStatus) tokenAnswer {
	if !st.Authenticated || st.User.Username == "" {
		reason := st.Error
		if reason == "" {
			reason = "token not authenticated"
		}
		return tokenAnswer{reason: reason}
	}
	u := user{name: st.User.Username, uid: st.User.UID, groups: withAuthenticated(st.User.Groups)}
	if len(st.User.Extra) > 0 {
		u.extra = map[string][]string{}
		for k, v := range st.User.Extra {
			u.extra[k] = slices.Clone(v)
		}
	}
	return tokenAnswer{user: u}
}

func (a tokenAnswer) err() error {
	if a.reason != "" {
		return errors.New(a.reason)
	}
	return nil
}

// verifyClientCert verifies a client certificate chain against the client CAs at now: the user is the leaf's
// common name, the groups its organizations, as the API server reads them.
func verifyClientCert(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) (user, error) {
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return user{}, fmt.Errorf("verify client certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if leaf.Subject.CommonName == "" {
		return user{}, errors.New("client certificate has no common name")
	}
	return user{name: leaf.Subject.CommonName, groups: withAuthenticated(leaf.Subject.Organization)}, nil
}

// withAuthenticated returns groups with system:authenticated added, as upstream adds it to every user its
// authenticators return.
func withAuthenticated(groups []string) []string {
	out := slices.Clone(groups)
	if !slices.Contains(out, groupAuthenticated) {
		out = append(out, groupAuthenticated)
	}
	return out
}
