package config

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
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
		if err == nil || !kubeclient.Unreachable(err) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-clk.After(unreachableRetry):
		}
	}
}
