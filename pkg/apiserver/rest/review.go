package rest

import (
	"context"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
)

// Reviewer answers the create-only reviews: TokenReviews, and access reviews
// in their subject, local and self forms. Implementations are safe for
// concurrent use.
type Reviewer interface {
	// ReviewToken authenticates spec.Token and reports the result.
	ReviewToken(ctx context.Context, spec authenticationv1.TokenReviewSpec) authenticationv1.TokenReviewStatus
	// ReviewAccess decides whether the subject of a valid spec may do what it
	// describes.
	ReviewAccess(spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus
}

// review serves a create of a create-only resource: the body is decoded and
// validated, answered in its status, and never stored.
func (q *req) review() {
	if q.info.Name != "" || q.info.Subresource != "" {
		q.fail(apierrors.NewMethodNotSupported(q.res.GroupResource(), q.info.Verb))
		return
	}
	if q.h.opts.Reviewer == nil {
		q.fail(apierrors.NewServiceUnavailable(fmt.Sprintf("%s are not served", q.res.Name)))
		return
	}
	data, err := readBody(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	obj, warnings, err := decodeBody(q.r, q.res, data)
	if err != nil {
		q.fail(err)
		return
	}
	if err := q.answer(obj); err != nil {
		q.fail(err)
		return
	}
	out, err := negotiate(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	addWarnings(q.w, warnings)
	out.encode(q.w, http.StatusCreated, obj, q.res.GroupVersion())
}

// answer validates a decoded review and fills in its status.
func (q *req) answer(obj runtime.Object) error {
	rv := q.h.opts.Reviewer
	switch o := obj.(type) {
	case *authenticationv1.TokenReview:
		if o.Spec.Token == "" {
			return apierrors.NewBadRequest("token is required for TokenReview")
		}
		o.Status = rv.ReviewToken(q.r.Context(), o.Spec)
	case *authenticationv1.SelfSubjectReview:
		o.Status.UserInfo = userInfo(q.user)
	case *authorizationv1.SubjectAccessReview:
		errs := validateAccessSpec(o.Spec, true)
		if errs = append(errs, metaMustBeEmpty(o.ObjectMeta, false)...); len(errs) > 0 {
			return q.invalid("", errs)
		}
		o.Status = rv.ReviewAccess(o.Spec)
	case *authorizationv1.LocalSubjectAccessReview:
		if o.Namespace == "" {
			o.Namespace = q.info.Namespace
		}
		if o.Namespace != q.info.Namespace {
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		errs := validateAccessSpec(o.Spec, true)
		errs = append(errs, metaMustBeEmpty(o.ObjectMeta, true)...)
		if a := o.Spec.ResourceAttributes; a != nil && a.Namespace != o.Namespace {
			errs = append(errs, field.Invalid(field.NewPath("spec.resourceAttributes.namespace"), a.Namespace, "must match metadata.namespace"))
		}
		if o.Spec.NonResourceAttributes != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec.nonResourceAttributes"), o.Spec.NonResourceAttributes,
				"disallowed on this kind of request"))
		}
		if len(errs) > 0 {
			return q.invalid("", errs)
		}
		o.Status = rv.ReviewAccess(o.Spec)
	case *authorizationv1.SelfSubjectAccessReview:
		spec := authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: o.Spec.ResourceAttributes, NonResourceAttributes: o.Spec.NonResourceAttributes}
		errs := validateAccessSpec(spec, false)
		if errs = append(errs, metaMustBeEmpty(o.ObjectMeta, false)...); len(errs) > 0 {
			return q.invalid("", errs)
		}
		if q.user != nil {
			spec.User, spec.UID, spec.Groups = q.user.Name, q.user.UID, q.user.Groups
		}
		o.Status = rv.ReviewAccess(spec)
	default:
		return apierrors.NewInternalError(fmt.Errorf("no review for %T", obj))
	}
	return nil
}

func userInfo(u *request.User) authenticationv1.UserInfo {
	if u == nil {
		return authenticationv1.UserInfo{}
	}
	out := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: append([]string(nil), u.Groups...)}
	for k, v := range u.Extra {
		if out.Extra == nil {
			out.Extra = map[string]authenticationv1.ExtraValue{}
		}
		out.Extra[k] = append(authenticationv1.ExtraValue(nil), v...)
	}
	return out
}

// validateAccessSpec applies upstream's rules to an access review's spec;
// withSubject requires a user or groups (not for self reviews).
func validateAccessSpec(spec authorizationv1.SubjectAccessReviewSpec, withSubject bool) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	if spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(p.Child("nonResourceAttributes"), spec.NonResourceAttributes,
			"cannot be specified in combination with resourceAttributes"))
	}
	if spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil {
		errs = append(errs, field.Invalid(p.Child("resourceAttributes"), spec.NonResourceAttributes,
			"exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if withSubject && spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(p.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	if a := spec.ResourceAttributes; a != nil {
		rp := p.Child("resourceAttributes")
		if fs := a.FieldSelector; fs != nil {
			fp := rp.Child("fieldSelector")
			errs = append(errs, validateSelectorAttributes(fs.RawSelector, len(fs.Requirements), fp)...)
			opts := metav1validation.FieldSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
			for i, r := range fs.Requirements {
				errs = append(errs, metav1validation.ValidateFieldSelectorRequirement(r, opts, fp.Child("requirements").Index(i))...)
			}
		}
		if ls := a.LabelSelector; ls != nil {
			lp := rp.Child("labelSelector")
			errs = append(errs, validateSelectorAttributes(ls.RawSelector, len(ls.Requirements), lp)...)
			opts := metav1validation.LabelSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
			for i, r := range ls.Requirements {
				errs = append(errs, metav1validation.ValidateLabelSelectorRequirement(r, opts, lp.Child("requirements").Index(i))...)
			}
		}
	}
	return errs
}

func validateSelectorAttributes(raw string, requirements int, p *field.Path) field.ErrorList {
	switch {
	case raw != "" && requirements > 0:
		return field.ErrorList{field.Invalid(p.Child("rawSelector"), raw, "may not specified at the same time as requirements")}
	case raw == "" && requirements == 0:
		return field.ErrorList{field.Required(p.Child("requirements"),
			fmt.Sprintf("when %s is specified, requirements or rawSelector is required", p))}
	}
	return nil
}

// metaMustBeEmpty requires a review's metadata to be empty (but for its
// namespace when namespaced), as upstream.
func metaMustBeEmpty(m metav1.ObjectMeta, namespaced bool) field.ErrorList {
	c := m
	c.ManagedFields = nil
	msg := "must be empty"
	if namespaced {
		c.Namespace = ""
		msg = "must be empty except for namespace"
	}
	if !apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, c) {
		return field.ErrorList{field.Invalid(field.NewPath("metadata"), m, msg)}
	}
	return nil
}
