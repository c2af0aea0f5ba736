package volume

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/internal/failpoint"
)

// tokenMaxAge is how old a token may get before it is renewed whatever its lifetime: upstream's 24 h.
const tokenMaxAge = 24 * time.Hour

// needsRefresh says whether a token issued at iat and expiring at exp must be renewed at now, as upstream's
// token manager decides: past 80% of its lifetime, or older than 24 hours.
func needsRefresh(iat, exp, now time.Time) bool {
	ttl := exp.Sub(iat)
	return !now.Before(iat.Add(tokenMaxAge)) || !now.Before(exp.Add(-ttl/5))
}

// tokenCache keeps the tokens of pods' service account projections, renewing them when needsRefresh says
// so. A renewal that fails while the old token is still valid keeps the old one (and says so). Safe for
// concurrent use.
type tokenCache struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byPod map[types.UID]map[string]*authenticationv1.TokenRequest
}

func newTokenCache(c clock.PassiveClock) *tokenCache {
	if d := failpoint.Duration(failpoint.TokenClockAhead); d > 0 {
		c = aheadClock{PassiveClock: c, ahead: d} // the fault suite's: renewals come d sooner
	}
	return &tokenCache{clock: c, byPod: map[types.UID]map[string]*authenticationv1.TokenRequest{}}
}

// token returns a token for the projection, from the cache or the API server.
func (c *tokenCache) token(ctx context.Context, api API, pod *v1.Pod, p *v1.ServiceAccountTokenProjection) (string, error) {
	tr, err := c.request(ctx, api, pod, p)
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// request returns the TokenRequest answered for the projection (its token and expiry), from the cache or
// the API server. The result is shared: callers do not change it.
func (c *tokenCache) request(ctx context.Context, api API, pod *v1.Pod, p *v1.ServiceAccountTokenProjection) (*authenticationv1.TokenRequest, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(3600)
	if p.ExpirationSeconds != nil {
		exp = *p.ExpirationSeconds
	}
	key := fmt.Sprintf("%s/%s/%d", sa, p.Audience, exp)
	now := c.clock.Now()
	c.mu.Lock()
	cached := c.byPod[pod.UID][key]
	c.mu.Unlock()
	if cached != nil {
		expires := cached.Status.ExpirationTimestamp.Time
		if !needsRefresh(expires.Add(-time.Duration(*cached.Spec.ExpirationSeconds)*time.Second), expires, now) {
			return cached, nil
		}
	}
	var auds []string
	if p.Audience != "" {
		auds = []string{p.Audience}
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: auds, ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	got, err := api.ServiceAccountToken(ctx, pod.Namespace, sa, req)
	if err != nil {
		if cached != nil && now.Before(cached.Status.ExpirationTimestamp.Time) {
			return cached, nil // renewal retried at the next sync; the token still works
		}
		return nil, fmt.Errorf("request a token of service account %s/%s: %w", pod.Namespace, sa, err)
	}
	if got.Spec.ExpirationSeconds == nil { // the lifetime the server granted, from its expiry
		granted := int64(got.Status.ExpirationTimestamp.Sub(now) / time.Second)
		got.Spec.ExpirationSeconds = &granted
	}
	c.mu.Lock()
	if c.byPod[pod.UID] == nil {
		c.byPod[pod.UID] = map[string]*authenticationv1.TokenRequest{}
	}
	c.byPod[pod.UID][key] = got
	c.mu.Unlock()
	return got, nil
}

func (c *tokenCache) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.byPod, uid)
	c.mu.Unlock()
}

// aheadClock reads its clock ahead by a fixed duration.
type aheadClock struct {
	clock.PassiveClock
	ahead time.Duration
}

func (c aheadClock) Now() time.Time { return c.PassiveClock.Now().Add(c.ahead) }
