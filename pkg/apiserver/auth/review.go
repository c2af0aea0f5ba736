package auth

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// Reviewer answers TokenReviews with the server's token authenticators and
// access reviews with its Authorizer's Review policy. It is safe for
// concurrent use.
type Reviewer struct {
	Tokens TokenAuthenticator
	// Audiences are the server's own, reviewed when a review names none.
	Audiences  []string
	Authorizer *Authorizer
}

var _ rest.Reviewer = Reviewer{}

// ReviewToken implements rest.Reviewer as kube-apiserver's TokenReview: the
// token is authenticated for the audiences the review names (the server's
// when it names none), and the status carries those the token is valid for.
func (r Reviewer) ReviewToken(ctx context.Context, spec authenticationv1.TokenReviewSpec) authenticationv1.TokenReviewStatus {
	var st authenticationv1.TokenReviewStatus
	if r.Tokens == nil {
		return st
	}
	auds := spec.Audiences
	if len(auds) == 0 {
		auds = r.Audiences
	}
	if len(auds) > 0 {
		ctx = WithAudiences(ctx, auds)
	}
	resp, ok, err := r.Tokens.AuthenticateToken(ctx, spec.Token)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	if !ok || resp == nil || resp.User == nil {
		return st
	}
	if len(auds) > 0 && len(intersect(auds, resp.Audiences)) == 0 {
		st.Error = "token audiences do not match the audiences asked for"
		return st
	}
	u := resp.User
	st.Authenticated = true
	st.User = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: append([]string(nil), u.Groups...)}
	for k, v := range u.Extra {
		if st.User.Extra == nil {
			st.User.Extra = map[string]authenticationv1.ExtraValue{}
		}
		st.User.Extra[k] = append(authenticationv1.ExtraValue(nil), v...)
	}
	st.Audiences = append([]string(nil), resp.Audiences...)
	return st
}

// ReviewAccess implements rest.Reviewer.
func (r Reviewer) ReviewAccess(spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	u := &request.User{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	info, err := AccessInfo(spec)
	st := authorizationv1.SubjectAccessReviewStatus{}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	d := r.Authorizer.Review(u, info)
	st.Allowed, st.Reason = d.Allowed, d.Reason
	return st
}

// AccessInfo returns the request attributes an access review's spec
// describes. A field selector given as requirements keeps those upstream
// understands (In or NotIn with one value); the error names the others, which
// are left out, so that the selector scopes nothing it does not say.
func AccessInfo(spec authorizationv1.SubjectAccessReviewSpec) (*request.Info, error) {
	if na := spec.NonResourceAttributes; na != nil {
		return &request.Info{Path: na.Path, Verb: na.Verb}, nil
	}
	info := &request.Info{IsResource: true}
	a := spec.ResourceAttributes
	if a == nil {
		return info, nil
	}
	info.Verb, info.Group, info.Version, info.Resource = a.Verb, a.Group, a.Version, a.Resource
	info.Subresource, info.Namespace, info.Name, info.ObjectName = a.Subresource, a.Namespace, a.Name, a.Name
	if ls := a.LabelSelector; ls != nil {
		info.LabelSelector = ls.RawSelector
	}
	fs := a.FieldSelector
	if fs == nil {
		return info, nil
	}
	if fs.RawSelector != "" {
		info.FieldSelector = fs.RawSelector
		return info, nil
	}
	var (
		sels []fields.Selector
		err  error
	)
	for _, r := range fs.Requirements {
		switch {
		case r.Operator == metav1.FieldSelectorOpIn && len(r.Values) == 1:
			sels = append(sels, fields.OneTermEqualSelector(r.Key, r.Values[0]))
		case r.Operator == metav1.FieldSelectorOpNotIn && len(r.Values) == 1:
			sels = append(sels, fields.OneTermNotEqualSelector(r.Key, r.Values[0]))
		default:
			err = &unsupportedRequirement{key: r.Key, op: string(r.Operator)}
		}
	}
	if len(sels) > 0 {
		info.FieldSelector = fields.AndSelectors(sels...).String()
	}
	return info, err
}

type unsupportedRequirement struct{ key, op string }

func (e *unsupportedRequirement) Error() string {
	return "field selector requirement on " + e.key + " with operator " + e.op +
		": only In and NotIn with exactly one value are supported"
}
