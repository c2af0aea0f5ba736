package config

import (
	"context"
	"errors"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/clock"
)

// unreachableRetry is how often the pod source tries an API server it cannot reach. client-go's reflector
// backs off up to 30 s (with as much jitter again) after failed lists and watches; a node whose API server
// comes back would then wait up to a minute before it learns what was deleted meanwhile. Retrying a failed
// connection here, before the reflector sees it, keeps that under a few seconds for the price of one
// connection attempt a second while the API server is away.
const unreachableRetry = time.Second

// retryUnreachable calls f until it returns something other than an error of an API server that cannot be
// reached (refused or reset connections, timeouts, 503, 429), or ctx ends. Other errors (410 Gone, 403, ...)
// go back to the caller at once.
func retryUnreachable[T any](ctx context.Context, clk clock.Clock, f func(context.Context) (T, error)) (T, error) {
	for {
		v, err := f(ctx)
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-clk.After(unreachableRetry):
		}
	}
}

// unreachable says whether err means that the API server could not be reached or could not answer.
func unreachable(err error) bool {
	var netErr net.Error
	switch {
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
