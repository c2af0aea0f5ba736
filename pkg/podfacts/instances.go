package podfacts

import (
	"slices"
	"sort"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// NewestFirst sorts containers (CRI statuses, any names mixed) so that each name's instances come newest
// first: by creation time, then by attempt. The kubelet acts on a container's newest instance and reports it.
//
// One exception, per name: a start cut off mid-way (containerd killed while the task started; the call
// failed and its undo could not reach containerd, so the process ran on) can leave a running instance and,
// from the next sync, newer instances that never started. The running one then counts as the newest and the
// never-started ones go last, so the kubelet keeps it instead of stopping it to start another under the
// restart back-off, and the status shows it.
func NewestFirst(list []*runtimeapi.ContainerStatus) {
	newer := func(a, b *runtimeapi.ContainerStatus) bool {
		if a.CreatedAt != b.CreatedAt {
			return a.CreatedAt > b.CreatedAt
		}
		return a.GetMetadata().GetAttempt() > b.GetMetadata().GetAttempt()
	}
	sort.SliceStable(list, func(i, j int) bool { return newer(list[i], list[j]) })
	demoted := neverStartedAheadOfRunning(list)
	if len(demoted) == 0 {
		return
	}
	sort.SliceStable(list, func(i, j int) bool {
		if di, dj := demoted[list[i]], demoted[list[j]]; di != dj {
			return dj
		}
		return newer(list[i], list[j])
	})
}

// neverStartedAheadOfRunning finds, in a newest-first list, the instances that never started (CREATED) and
// are newer than a running instance of the same name with nothing but such instances between them.
func neverStartedAheadOfRunning(list []*runtimeapi.ContainerStatus) map[*runtimeapi.ContainerStatus]bool {
	// The usual case, on every sync: no instance waits to start, nothing to look for.
	if !slices.ContainsFunc(list, func(c *runtimeapi.ContainerStatus) bool {
		return c.State == runtimeapi.ContainerState_CONTAINER_CREATED
	}) {
		return nil
	}
	pending := map[string][]*runtimeapi.ContainerStatus{}
	decided := map[string]bool{}
	var out map[*runtimeapi.ContainerStatus]bool
	for _, c := range list {
		name := c.GetMetadata().GetName()
		if decided[name] {
			continue
		}
		switch c.State {
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			pending[name] = append(pending[name], c)
			continue
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			for _, p := range pending[name] {
				if out == nil {
					out = map[*runtimeapi.ContainerStatus]bool{}
				}
				out[p] = true
			}
		}
		decided[name] = true
	}
	return out
}
