package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// AccessReviewer asks the API server whether a user may do something (authorization.k8s.io/v1
// SubjectAccessReview).
type AccessReviewer interface {
	Create(ctx context.Context, review *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// How long access review answers are kept: upstream's --authorization-webhook-cache-authorized-ttl and
// --authorization-webhook-cache-unauthorized-ttl.
const (
	allowedCacheTTL = 5 * time.Minute
	deniedCacheTTL  = 30 * time.Second
)

// authorizer decides whether a user may make a request of the endpoint by asking the API server, through a
// SubjectAccessReview, whether the user may <verb> the subresource of this node (resource nodes, name the
// node's), as upstream's kubelet asks with webhook authorization. Answers are cached. Safe for concurrent use.
type authorizer struct {
	reviews AccessReviewer
	node    string
	cache   *ttlCache[accessAnswer]
}

type accessAnswer struct {
	allowed bool
	reason  string
}

func newAuthorizer(reviews AccessReviewer, node string, clk clock.PassiveClock) *authorizer {
	return &authorizer{reviews: reviews, node: node, cache: newTTLCache[accessAnswer](clk, reviewCacheSize)}
}

// authorize reports whether u may <verb> nodes/<subresource> of the node, with the API server's reason; an
// API server that cannot be asked is an error.
func (a *authorizer) authorize(ctx context.Context, u user, verb, subresource string) (bool, string, error) {
	key := accessKey(u, verb, subresource)
	if ans, ok := a.cache.get(key); ok {
		return ans.allowed, ans.reason, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.name, UID: u.uid, Groups: u.groups, Extra: extraValues(u.extra),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Version: "v1", Resource: "nodes", Subresource: subresource, Name: a.node,
		},
	}}
	out, err := a.reviews.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	ans := accessAnswer{allowed: out.Status.Allowed && !out.Status.Denied, reason: out.Status.Reason}
	ttl := deniedCacheTTL
	if ans.allowed {
		ttl = allowedCacheTTL
	}
	a.cache.set(key, ans, ttl)
	return ans.allowed, ans.reason, nil
}

// accessKey identifies one question to the API server: who (name, uid, groups, extra) does what.
func accessKey(u user, verb, subresource string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %q %q", u.name, u.uid, verb, subresource)
	for _, g := range u.groups {
		fmt.Fprintf(&b, " g%q", g)
	}
	keys := make([]string, 0, len(u.extra))
	for k := range u.extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " x%q%q", k, u.extra[k])
	}
	return b.String()
}

func extraValues(extra map[string][]string) map[string]authorizationv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = v
	}
	return out
}
