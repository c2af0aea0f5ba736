package podsync

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// featuresTTL is how long the runtime's features, as its Status reports them, serve admission and the
// container starts before they are asked again.
const featuresTTL = time.Minute

// featuresTimeout bounds the Status call of an admission, which has no context of its own.
const featuresTimeout = 10 * time.Second

// runtimeFeatures caches the runtime's features: those of its default handler (RuntimeStatus.runtime_handlers)
// and its own (StatusResponse.features).
type runtimeFeatures struct {
	mu  sync.Mutex
	at  time.Time
	set featureSet
}

// featureSet is what the runtime supports of what the kubelet asks of it.
type featureSet struct {
	rro bool // the default handler mounts recursively read-only
	sgp bool // supplementalGroupsPolicy is honoured, and the container's user reported
	uns bool // the default handler runs pods in user namespaces
}

// supportsRecursiveReadOnly says whether the runtime's default handler mounts recursively read-only, as
// upstream's kubelet reads it from the runtime's status; a failed Status keeps the last answer.
func (k *Kubelet) supportsRecursiveReadOnly(ctx context.Context) bool {
	return k.runtimeFeatures(ctx).rro
}

// supportsSupplementalGroupsPolicy says whether the runtime honours supplementalGroupsPolicy (Strict among
// it), as upstream's kubelet learns it from the runtime's status and admits by it; a failed Status keeps the
// last answer.
func (k *Kubelet) supportsSupplementalGroupsPolicy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), featuresTimeout)
	defer cancel()
	return k.runtimeFeatures(ctx).sgp
}

// supportsUserNamespaces says whether the runtime's default handler runs pods in user namespaces
// (hostUsers: false), as its status reports; a failed Status keeps the last answer.
func (k *Kubelet) supportsUserNamespaces() bool {
	ctx, cancel := context.WithTimeout(context.Background(), featuresTimeout)
	defer cancel()
	return k.runtimeFeatures(ctx).uns
}

// cachedRecursiveReadOnly is supportsRecursiveReadOnly without a call to the runtime, for the status of
// every sync: the last answer (admissions and container starts keep it fresh), asked once if there is none.
func (k *Kubelet) cachedRecursiveReadOnly() bool {
	k.features.mu.Lock()
	set, known := k.features.set, !k.features.at.IsZero()
	k.features.mu.Unlock()
	if known {
		return set.rro
	}
	ctx, cancel := context.WithTimeout(context.Background(), featuresTimeout)
	defer cancel()
	return k.supportsRecursiveReadOnly(ctx)
}

// runtimeFeatures returns the cached features, asking the runtime again once they are older than featuresTTL.
func (k *Kubelet) runtimeFeatures(ctx context.Context) featureSet {
	f := &k.features
	f.mu.Lock()
	defer f.mu.Unlock()
	now := k.clock.Now()
	if !f.at.IsZero() && now.Sub(f.at) < featuresTTL {
		return f.set
	}
	resp, err := k.runtime.Status(ctx, false)
	if err != nil {
		return f.set
	}
	f.set = featureSet{
		rro: defaultHandler(resp.GetRuntimeHandlers()).GetFeatures().GetRecursiveReadOnlyMounts(),
		sgp: resp.GetFeatures().GetSupplementalGroupsPolicy(),
		uns: defaultHandler(resp.GetRuntimeHandlers()).GetFeatures().GetUserNamespaces(),
	}
	f.at = now
	return f.set
}

// defaultHandler is the runtime's default handler (named ""), nil when it lists none.
func defaultHandler(handlers []*runtimeapi.RuntimeHandler) *runtimeapi.RuntimeHandler {
	for _, h := range handlers {
		if h.GetName() == "" {
			return h
		}
	}
	return nil
}

// hasReadOnlyMount says whether a container of the pod mounts a volume read-only: only then does its status
// (status.volumeMounts' recursiveReadOnly) need the runtime's support for recursive read-only mounts.
func hasReadOnlyMount(pod *v1.Pod) bool {
	readOnly := func(mounts []v1.VolumeMount) bool {
		for _, m := range mounts {
			if m.ReadOnly {
				return true
			}
		}
		return false
	}
	for i := range pod.Spec.InitContainers {
		if readOnly(pod.Spec.InitContainers[i].VolumeMounts) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if readOnly(pod.Spec.Containers[i].VolumeMounts) {
			return true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if readOnly(pod.Spec.EphemeralContainers[i].VolumeMounts) {
			return true
		}
	}
	return false
}
