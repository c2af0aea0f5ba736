package rest

import (
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tooLargeRetrySeconds is the Retry-After of a "Too large resource version"
// error, as upstream's watch cache sends it.
const tooLargeRetrySeconds = 1

// TooLargeResourceVersion is upstream's error for a read at a resourceVersion
// the store has not reached: 504 Timeout, a retry after one second, and the
// ResourceVersionTooLarge cause client-go's reflector relists on.
func TooLargeResourceVersion(rv, current uint64) *apierrors.StatusError {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, current), tooLargeRetrySeconds)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// parseResourceVersion parses a read's resourceVersion; "" and "0" are 0.
func parseResourceVersion(s string) (uint64, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: %v", s, err))
	}
	return rv, nil
}

// checkReadVersion refuses a read (get, list, or watch) at a resourceVersion
// ahead of the store. Upstream's watch cache first waits up to 3 s for itself
// to catch up with etcd; reads here come from the committed store, which has
// every version ever acknowledged, so a version ahead of it comes from another
// store (a wiped data directory, say) and waiting would not help.
func (q *req) checkReadVersion(rv uint64) error {
	if rv == 0 {
		return nil
	}
	if cur := q.h.store.CurrentRV(); rv > cur {
		return TooLargeResourceVersion(rv, cur)
	}
	return nil
}

// validateListOptions applies upstream's rules on resourceVersion,
// resourceVersionMatch and continue to a list.
func validateListOptions(params map[string][]string) error {
	get := func(k string) string {
		if v := params[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	opts := &internalversion.ListOptions{
		ResourceVersion:      get("resourceVersion"),
		ResourceVersionMatch: metav1.ResourceVersionMatch(get("resourceVersionMatch")),
		Continue:             get("continue"),
	}
	if s := get("sendInitialEvents"); s != "" {
		b := s == "true"
		opts.SendInitialEvents = &b
	}
	if errs := metainternalvalidation.ValidateListOptions(opts, true); len(errs) > 0 {
		return apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "", errs)
	}
	return nil
}
