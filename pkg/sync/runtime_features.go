package podsync

import (
	"context"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// featuresTTL is how long the runtime's handler features, as its Status reports them, serve the container
// starts before they are asked again.
const featuresTTL = time.Minute

// runtimeFeatures caches the features of the runtime's default handler (RuntimeStatus.runtime_handlers).
type runtimeFeatures struct {
	mu  sync.Mutex
	at  time.Time
	rro bool
}

// supportsRecursiveReadOnly says whether the runtime's default handler mounts recursively read-only, as
// upstream's kubelet reads it from the runtime's status; a failed Status keeps the last answer.
func (k *Kubelet) supportsRecursiveReadOnly(ctx context.Context) bool {
	f := &k.features
	f.mu.Lock()
	defer f.mu.Unlock()
	now := k.clock.Now()
	if !f.at.IsZero() && now.Sub(f.at) < featuresTTL {
		return f.rro
	}
	resp, err := k.runtime.Status(ctx, false)
	if err != nil {
		return f.rro
	}
	f.rro, f.at = handlerSupportsRRO(resp.GetRuntimeHandlers(), ""), now
	return f.rro
}

// handlerSupportsRRO says whether the named handler ("" for the default) offers recursive read-only mounts.
func handlerSupportsRRO(handlers []*runtimeapi.RuntimeHandler, name string) bool {
	for _, h := range handlers {
		if h.GetName() == name {
			return h.GetFeatures().GetRecursiveReadOnlyMounts()
		}
	}
	return false
}
