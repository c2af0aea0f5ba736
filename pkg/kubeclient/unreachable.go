package kubeclient

import (
	"errors"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Unreachable says whether err means that the API server could not be reached or could not answer (refused
// or reset connections, timeouts, 503, 429), rather than that it answered no.
func Unreachable(err error) bool {
	var netErr net.Error
	switch {
	case err == nil:
		return false
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return true
	case apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err),
		apierrors.IsTimeout(err):
		return true
	case errors.As(err, &netErr):
		return true
	}
	return false
}
