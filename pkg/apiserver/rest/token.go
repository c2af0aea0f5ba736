package rest

import (
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TokenSubject is what a service account token is issued for: a service
// account and, for a bound token, the one object it is bound to (a Pod, with
// the Node it runs on when known; a Secret; or a Node alone).
type TokenSubject struct {
	ServiceAccount *corev1.ServiceAccount
	Pod            *corev1.Pod
	Node           *corev1.Node
	Secret         *corev1.Secret
}

// TokenIssuer signs service account tokens. Implementations are safe for
// concurrent use.
type TokenIssuer interface {
	IssueToken(subj TokenSubject, audiences []string, now time.Time, expiration time.Duration) (string, error)
}

// TokenOptions configure the serviceaccounts/token subresource.
type TokenOptions struct {
	Issuer TokenIssuer
	// Audiences are given to a TokenRequest that names none (the server's).
	Audiences []string
	// MaxExpiration shortens longer requests, with a warning; no bound if 0.
	MaxExpiration time.Duration
}

// Bounds of a TokenRequest's expirationSeconds, as kube-apiserver's.
const (
	DefaultTokenExpirationSeconds = 60 * 60
	MinTokenExpirationSeconds     = 10 * 60
	maxTokenExpirationSeconds     = 1 << 32
)

var tokenRequestGVK = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

// requestToken serves serviceaccounts/token, as kube-apiserver's TokenREST:
// the service account must exist (with the request's UID, if it gives one);
// audiences default to the server's and the expiration to an hour; a bound
// object (a Pod, with its Node; a Secret; a Node) must exist with the UID
// the request gives; admission sees the request as sent; the answer carries
// the signed token. Nothing is stored.
func (q *req) requestToken() {
	opts := q.h.opts.Tokens
	if opts == nil || opts.Issuer == nil {
		q.fail(apierrors.NewServiceUnavailable("service account tokens are not served"))
		return
	}
	tr := &authenticationv1.TokenRequest{}
	if !q.decodeBody(tokenRequestGVK, tr) {
		return
	}
	// Admission sees the request as sent, before its defaults, as kube-apiserver's NodeRestriction sees it.
	if err := q.admit(q.r.Context(), tr.DeepCopy(), nil); err != nil {
		q.fail(err)
		return
	}
	name, ns := q.info.Name, q.info.Namespace
	gk := tokenRequestGVK.GroupKind()
	if tr.Name != "" && tr.Name != name {
		q.fail(apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("name"),
			tr.Name, "must match the service account name if specified")}))
		return
	}
	if tr.Namespace != "" && tr.Namespace != ns {
		q.fail(apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("namespace"),
			tr.Namespace, "must match the service account namespace if specified")}))
		return
	}
	sa, err := getStored[corev1.ServiceAccount](q, q.key(), q.res.GroupResource(), name)
	if err != nil {
		q.fail(err)
		return
	}
	if tr.UID != "" && tr.UID != sa.UID {
		q.fail(apierrors.NewConflict(schema.GroupResource{Group: gk.Group, Resource: gk.Kind}, name, fmt.Errorf(
			"the UID in the token request (%s) does not match the UID of the service account (%s)", tr.UID, sa.UID)))
		return
	}
	if len(tr.Spec.Audiences) == 0 {
		tr.Spec.Audiences = append([]string(nil), opts.Audiences...)
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = new(int64)
		*tr.Spec.ExpirationSeconds = DefaultTokenExpirationSeconds
	}
	tr.Name, tr.Namespace, tr.UID = sa.Name, sa.Namespace, sa.UID
	now := q.h.opts.Clock.Now()
	tr.CreationTimestamp = metav1.NewTime(now)
	tr.Status = authenticationv1.TokenRequestStatus{}
	if errs := validateTokenRequest(tr); len(errs) > 0 {
		q.fail(apierrors.NewInvalid(gk, "", errs))
		return
	}
	subj, err := q.tokenSubject(sa, tr.Spec.BoundObjectRef)
	if err != nil {
		q.fail(err)
		return
	}
	if max := int64(opts.MaxExpiration / time.Second); max > 0 && *tr.Spec.ExpirationSeconds > max {
		addWarnings(q.w, []string{fmt.Sprintf("requested expiration of %d seconds shortened to %d seconds",
			*tr.Spec.ExpirationSeconds, max)})
		*tr.Spec.ExpirationSeconds = max
	}
	exp := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	token, err := opts.Issuer.IssueToken(subj, tr.Spec.Audiences, now, exp)
	if err != nil {
		q.fail(apierrors.NewInternalError(fmt.Errorf("failed to generate token: %w", err)))
		return
	}
	tr.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(now.Add(exp))}
	out, err := negotiate(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	out.encode(q.w, http.StatusCreated, tr, authenticationv1.SchemeGroupVersion)
}

// validateTokenRequest applies kube-apiserver's rules to a defaulted request.
func validateTokenRequest(tr *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "expirationSeconds")
	switch e := *tr.Spec.ExpirationSeconds; {
	case e < MinTokenExpirationSeconds:
		errs = append(errs, field.Invalid(p, e, "may not specify a duration less than 10 minutes"))
	case e > maxTokenExpirationSeconds:
		errs = append(errs, field.Invalid(p, e, "may not specify a duration larger than 2^32 seconds"))
	}
	return errs
}

// tokenSubject returns what a token for sa is issued for: sa and the object
// ref binds it to, which must exist (with ref's UID, when given).
func (q *req) tokenSubject(sa *corev1.ServiceAccount, ref *authenticationv1.BoundObjectReference) (TokenSubject, error) {
	subj := TokenSubject{ServiceAccount: sa}
	if ref == nil {
		return subj, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return subj, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of apiVersion %q", ref.APIVersion))
	}
	gvk := gv.WithKind(ref.Kind)
	ns := q.info.Namespace
	var uid types.UID
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		pod, err := getStored[corev1.Pod](q, "pods/"+ns+"/"+ref.Name, corev1.Resource("pods"), ref.Name)
		if err != nil {
			return subj, err
		}
		if pod.Spec.ServiceAccountName != sa.Name {
			return subj, apierrors.NewBadRequest(fmt.Sprintf(
				"cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", sa.Name))
		}
		subj.Pod, uid = pod, pod.UID
		if n := pod.Spec.NodeName; n != "" {
			node, err := getStored[corev1.Node](q, "nodes//"+n, corev1.Resource("nodes"), n)
			if err != nil {
				// A missing node still leaves its name in the claims, as kube-apiserver.
				node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
			}
			subj.Node = node
		}
	case gvk.Group == "" && gvk.Kind == "Node":
		node, err := getStored[corev1.Node](q, "nodes//"+ref.Name, corev1.Resource("nodes"), ref.Name)
		if err != nil {
			return subj, err
		}
		subj.Node, uid = node, node.UID
	case gvk.Group == "" && gvk.Kind == "Secret":
		secret, err := getStored[corev1.Secret](q, "secrets/"+ns+"/"+ref.Name, corev1.Resource("secrets"), ref.Name)
		if err != nil {
			return subj, err
		}
		subj.Secret, uid = secret, secret.UID
	default:
		return subj, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	if ref.UID != "" && uid != ref.UID {
		return subj, apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name, fmt.Errorf(
			"the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return subj, nil
}

// getStored returns the committed object at key, which is a T, or the API's
// NotFound for gr and name.
func getStored[T any](q *req, key string, gr schema.GroupResource, name string) (*T, error) {
	o, ok := q.h.store.Get(key)
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	obj, err := q.h.store.Decode(o)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode %s: %w", key, err))
	}
	t, ok := any(obj).(*T)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s holds a %T", key, obj))
	}
	return t, nil
}
