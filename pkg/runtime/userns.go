package runtime

import (
	"context"
	"fmt"
	"slices"
	"sync"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
)

// A pod with hostUsers: false runs in a user namespace of its own, as containerd 2.x's CRI plugin runs it:
//
//   - the pause container is started in a new user namespace with the pod's mappings, and runc creates the
//     pod's network, IPC and UTS namespaces inside it, owned by it (so the pod's root may set its network
//     sysctls and mount sysfs); the network namespace is then bound at its usual path and the pod network set
//     up in it, after the pause task is created rather than beside it;
//   - each container joins the pause container's user namespace with the same mappings;
//   - root filesystems (the pause container's too: it does not run from the shared view) are snapshots the
//     overlay snapshotter mounts ID-mapped (its remap labels), and every bind mount the kubelet sends with
//     mappings is ID-mapped by runc, so files keep the IDs the pod sees.
//
// usernsSupport answers whether this host can do that, once: runc must report user namespaces and ID-mapped
// mounts among its features (asked through containerd, as the CRI plugin asks), and the snapshotter must be
// able to ID-map root filesystems (its remap-ids capability: overlayfs on a kernel with ID-mapped lower
// layers). An answer that could not be had (containerd away) is asked again next time.
type usernsSupport struct {
	mu    sync.Mutex
	known bool
	why   string // empty when supported
}

// userNamespaces reports whether pods may run in user namespaces of their own, and if not, why.
func (r *Runtime) userNamespaces(ctx context.Context) (bool, string) {
	s := &r.usernsSupport
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known {
		return s.why == "", s.why
	}
	why, err := r.usernsMissing(ctx)
	if err != nil {
		return false, err.Error()
	}
	s.known, s.why = true, why
	if why != "" {
		logger(ctx).Info("Pods in user namespaces are not supported on this host", "reason", why)
	}
	return why == "", why
}

// usernsMissing asks runc's features and the snapshotter's capabilities: what is missing, if anything, or
// an error when containerd could not answer.
func (r *Runtime) usernsMissing(ctx context.Context) (string, error) {
	info, err := r.client.RuntimeInfo(r.ns(ctx), "io.containerd.runc.v2", nil)
	if err != nil {
		return "", fmt.Errorf("asking runc's features: %w", err)
	}
	f, _ := info.Features.(*features.Features)
	if why := runcUsernsMissing(f); why != "" {
		return why, nil
	}
	capabilities, err := r.client.GetSnapshotterCapabilities(r.ns(ctx), r.cfg.Snapshotter)
	if err != nil {
		return "", fmt.Errorf("asking the snapshotter's capabilities: %w", err)
	}
	if !slices.Contains(capabilities, "remap-ids") {
		return fmt.Sprintf("the %s snapshotter cannot ID-map root filesystems on this kernel", r.cfg.Snapshotter), nil
	}
	return "", nil
}

// runcUsernsMissing says what runc lacks for pod user namespaces, as containerd's CRI plugin decides it:
// user namespaces and ID-mapped mounts.
func runcUsernsMissing(f *features.Features) string {
	if f == nil || f.Linux == nil {
		return "runc reports no Linux features (runc 1.1 or older)"
	}
	if !slices.Contains(f.Linux.Namespaces, "user") {
		return "runc does not support user namespaces"
	}
	if m := f.Linux.MountExtensions; m == nil || m.IDMap == nil || m.IDMap.Enabled == nil || !*m.IDMap.Enabled {
		return "runc or the kernel does not support ID-mapped mounts"
	}
	return ""
}

// remapLabels are the labels that make the overlay snapshotter mount a snapshot ID-mapped by the pod's
// mappings (one each, from ID 0, as PodUserNamespace checked).
func remapLabels(uids, gids []runtimespec.LinuxIDMapping) snapshots.Opt {
	return containerd.WithUserNSRemapperLabels(uids, gids)
}
