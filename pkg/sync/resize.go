package podsync

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/allocation"
	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/status"
)

// Resize event reasons, as upstream names them.
const (
	eventResizeStarted    = "ResizeStarted"
	eventResizeCompleted  = "ResizeCompleted"
	eventResizeError      = "ResizeError"
	eventResizeDeferred   = "ResizeDeferred"
	eventResizeInfeasible = "ResizeInfeasible"
)

// resizeState is what the kubelet reports of one pod's resize between syncs.
type resizeState struct {
	pendingReason, pendingMessage string
	pendingGeneration             int64
	inProgress                    bool
	inProgressGeneration          int64
	errMessage                    string
}

// resizes holds the pods' resize states. It is safe for concurrent use.
type resizes struct {
	mu   sync.Mutex
	pods map[types.UID]*resizeState
}

func (r *resizes) update(uid types.UID, fn func(*resizeState)) resizeState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pods == nil {
		r.pods = map[types.UID]*resizeState{}
	}
	st, ok := r.pods[uid]
	if !ok {
		st = &resizeState{}
		r.pods[uid] = st
	}
	fn(st)
	return *st
}

// retain forgets the pods not in active.
func (r *resizes) retain(active map[types.UID]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.pods {
		if !active[uid] {
			delete(r.pods, uid)
		}
	}
}

// allocatedPod returns the pod as the kubelet runs it: with the resources allocated to its containers.
// The first sync of a pod allocates what its spec asks (admission accepted it). When the spec asks for
// other resources later (pods/resize), the resize is accepted if the pod would still be admitted beside
// the others, as upstream decides it: Infeasible when the node can never hold it, Deferred when the other
// pods leave no room now (retried at every sync).
func (k *Kubelet) allocatedPod(pod *v1.Pod) *v1.Pod {
	alloc, ok := k.alloc.Allocated(pod.UID)
	if !ok {
		k.saveAllocation(pod, allocation.FromSpec(pod))
		return pod
	}
	if !allocation.Differs(pod, alloc) {
		k.resizes.update(pod.UID, func(s *resizeState) { s.pendingReason, s.pendingMessage = "", "" })
		return allocation.WithAllocated(pod, alloc)
	}
	reason, message := allocation.ReasonInfeasible, allocation.Infeasible(pod, k.nodeInfo().Allocatable)
	if message == "" {
		if res := k.admit(pod); !res.Admit {
			reason, message = allocation.ReasonDeferred, res.Message
		}
	}
	if message != "" {
		prev := k.resizes.update(pod.UID, func(s *resizeState) {})
		k.resizes.update(pod.UID, func(s *resizeState) {
			s.pendingReason, s.pendingMessage, s.pendingGeneration = reason, message, pod.Generation
		})
		if prev.pendingReason != reason || prev.pendingGeneration != pod.Generation {
			evReason, prefix := eventResizeDeferred, "Pod resize Deferred"
			if reason == allocation.ReasonInfeasible {
				evReason, prefix = eventResizeInfeasible, "Pod resize Infeasible"
			}
			k.recorder.Event(podRef(pod, ""), v1.EventTypeWarning, evReason, allocation.EventMessage(prefix, pod, nil)+": "+message)
		}
		return allocation.WithAllocated(pod, alloc)
	}
	// An accepted resize is durable before anything acts on it: a restarted kubelet must not take the
	// spec's resources for what its containers were given.
	if !k.saveAllocation(pod, allocation.FromSpec(pod)) {
		return allocation.WithAllocated(pod, alloc)
	}
	if err := k.alloc.Flush(); err != nil {
		klog.ErrorS(err, "Failed to checkpoint the pod's allocated resources", "pod", klog.KObj(pod))
	}
	k.resizes.update(pod.UID, func(s *resizeState) {
		s.pendingReason, s.pendingMessage = "", ""
		s.inProgress, s.inProgressGeneration, s.errMessage = true, pod.Generation, ""
	})
	k.recorder.Event(podRef(pod, ""), v1.EventTypeNormal, eventResizeStarted, allocation.EventMessage("Pod resize started", pod, nil))
	return pod
}

func (k *Kubelet) saveAllocation(pod *v1.Pod, alloc map[string]v1.ResourceRequirements) bool {
	if err := k.alloc.SetAllocated(pod.UID, alloc); err != nil {
		klog.ErrorS(err, "Failed to checkpoint the pod's allocated resources", "pod", klog.KObj(pod))
		return false
	}
	return true
}

// actuated returns what the pod's running containers were last given, by name. A running container the
// checkpoint does not know (one started before the checkpoint existed) is taken to run with its allocation.
func (k *Kubelet) actuated(pod *v1.Pod, state *pleg.PodState) map[string]v1.ResourceRequirements {
	out := map[string]v1.ResourceRequirements{}
	for _, c := range runningResizable(pod, state) {
		if r, ok := k.alloc.Actuated(pod.UID, c.spec.Name); ok {
			out[c.spec.Name] = r
			continue
		}
		if err := k.alloc.SetActuated(pod.UID, c.spec.Name, c.spec.Resources); err != nil {
			klog.ErrorS(err, "Failed to checkpoint a container's resources", "pod", klog.KObj(pod), "container", c.spec.Name)
		}
		out[c.spec.Name] = *c.spec.Resources.DeepCopy()
	}
	return out
}

type runningContainer struct {
	spec *v1.Container
	cs   *runtimeapi.ContainerStatus
}

// runningResizable returns the pod's app and sidecar containers whose newest instance runs.
func runningResizable(pod *v1.Pod, state *pleg.PodState) []runningContainer {
	if state == nil {
		return nil
	}
	cur := byName(state, "")
	var out []runningContainer
	add := func(c *v1.Container) {
		if latest := first(cur[c.Name]); latest != nil && latest.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, runningContainer{c, latest})
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; podfacts.IsSidecar(c) {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// addResizeRestarts makes a sync restart the running app containers whose resize touches a resource with
// resizePolicy RestartContainer, as upstream does.
func addResizeRestarts(a *podActions, pod *v1.Pod, state *pleg.PodState, actuated map[string]v1.ResourceRequirements) {
	if a.KillPod || a.CreateSandbox {
		return
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for _, rc := range runningResizable(pod, state) {
			if rc.spec != c {
				continue
			}
			if act, ok := actuated[c.Name]; ok && !allocation.CPUMemoryEqual(act, c.Resources) && allocation.RestartNeeded(c, act) {
				if _, killing := a.ContainersToKill[rc.cs.Id]; !killing {
					a.ContainersToKill[rc.cs.Id] = killInfo{name: c.Name, message: fmt.Sprintf("Container %s resize requires restart", c.Name)}
					a.ContainersToStart = append(a.ContainersToStart, i)
				}
			}
		}
	}
}

// resizeRunning gives the running containers whose allocation changed their new resources in place, and
// records what they were given. It returns how many it resized, and the first error.
func (k *Kubelet) resizeRunning(ctx context.Context, pod *v1.Pod, state *pleg.PodState, actuated map[string]v1.ResourceRequirements) (n int, err error) {
	for _, rc := range runningResizable(pod, state) {
		act, ok := actuated[rc.spec.Name]
		if !ok || allocation.CPUMemoryEqual(act, rc.spec.Resources) {
			continue
		}
		if allocation.RestartNeeded(rc.spec, act) && !podfacts.IsSidecar(rc.spec) {
			continue // addResizeRestarts restarts it; a sidecar is resized in place
		}
		if err := k.checkMemoryDecrease(ctx, rc, act); err != nil {
			return n, err
		}
		res := &runtimeapi.ContainerResources{Linux: k.containerResources(pod, rc.spec)}
		if err := k.runtime.UpdateContainerResources(ctx, rc.cs.Id, res); err != nil {
			return n, fmt.Errorf("update resources of container %q: %w", rc.spec.Name, err)
		}
		klog.FromContext(ctx).V(2).Info("Resized container in place", "pod", klog.KObj(pod), "container", rc.spec.Name)
		if err := k.alloc.SetActuated(pod.UID, rc.spec.Name, rc.spec.Resources); err != nil {
			return n, fmt.Errorf("checkpoint resources of container %q: %w", rc.spec.Name, err)
		}
		n++
		if err := k.alloc.Flush(); err != nil {
			return n, fmt.Errorf("checkpoint resources of container %q: %w", rc.spec.Name, err)
		}
	}
	return n, nil
}

// checkMemoryDecrease refuses, as upstream's kubelet does (best effort: the usage may grow after the check),
// to lower a container's memory limit below what it uses now: cgroup v1 refuses the write after trying to
// reclaim, cgroup v2 OOM-kills. The resize stays in progress with the error, and is tried again on each sync.
// Usage is the working set (what reclaim cannot free), from the runtime's stats; without stats the runtime
// is left to judge.
func (k *Kubelet) checkMemoryDecrease(ctx context.Context, rc runningContainer, actuated v1.ResourceRequirements) error {
	limit := rc.spec.Resources.Limits.Memory().Value()
	if !memoryDecrease(actuated.Limits.Memory().Value(), limit) {
		return nil
	}
	st, err := k.runtime.ContainerStats(ctx, rc.cs.Id)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("No memory usage to check a memory limit decrease against", "container", rc.spec.Name, "err", err)
		return nil
	}
	if usage := int64(st.GetMemory().GetWorkingSetBytes().GetValue()); usage >= limit {
		return fmt.Errorf("container %q: memory limit (%d) below current usage (%d)", rc.spec.Name, limit, usage)
	}
	return nil
}

// memoryDecrease reports whether a memory limit goes down (0 is no limit).
func memoryDecrease(from, to int64) bool { return to > 0 && (from == 0 || to < from) }

// finishResize records the outcome of a sync for the pod's resize: an error keeps it in progress with
// reason Error (a ResizeError event when the error is new); once every running container has its
// allocation, the resize is complete (a ResizeCompleted event). A sync that killed containers (a resize
// that restarts one) judges nothing from the state it began with, which still shows them running: the
// next sync, on the restarted container's events, completes the resize; otherwise the status would show
// the old container with the new resources and no resize in progress.
func (k *Kubelet) finishResize(ctx context.Context, pod *v1.Pod, state *pleg.PodState, resizeErr error, stale bool) (changed bool) {
	if stale && resizeErr == nil {
		return false
	}
	done := true
	for _, rc := range runningResizable(pod, state) {
		if act, ok := k.alloc.Actuated(pod.UID, rc.spec.Name); ok && !allocation.CPUMemoryEqual(act, rc.spec.Resources) {
			done = false
		}
	}
	prev := k.resizes.update(pod.UID, func(s *resizeState) {})
	defer func() { changed = k.resizes.update(pod.UID, func(*resizeState) {}) != prev }()
	switch {
	case resizeErr != nil:
		k.resizes.update(pod.UID, func(s *resizeState) {
			s.inProgress, s.errMessage = true, resizeErr.Error()
			if s.inProgressGeneration == 0 {
				s.inProgressGeneration = pod.Generation
			}
		})
		if prev.errMessage != resizeErr.Error() {
			k.recorder.Event(podRef(pod, ""), v1.EventTypeWarning, eventResizeError, allocation.EventMessage("Pod resize error", pod, resizeErr))
		}
	case done && prev.inProgress:
		k.resizes.update(pod.UID, func(s *resizeState) { s.inProgress, s.errMessage = false, "" })
		klog.FromContext(ctx).Info("Pod resize completed", "pod", klog.KObj(pod))
		k.recorder.Event(podRef(pod, ""), v1.EventTypeNormal, eventResizeCompleted, allocation.EventMessage("Pod resize completed", pod, nil))
	case !done && !prev.inProgress:
		// A restarted kubelet finds a resize it accepted before and has not finished.
		k.resizes.update(pod.UID, func(s *resizeState) { s.inProgress, s.inProgressGeneration = true, pod.Generation })
	}
	return false // set by the deferred comparison
}

// resizeStatus is the status input of the pod's resize.
func (k *Kubelet) resizeStatus(pod *v1.Pod, state *pleg.PodState) *status.Resize {
	alloc, ok := k.alloc.Allocated(pod.UID)
	if !ok {
		return nil
	}
	st := k.resizes.update(pod.UID, func(*resizeState) {})
	r := &status.Resize{
		Allocated: alloc, Actuated: map[string]v1.ResourceRequirements{},
		PendingReason: st.pendingReason, PendingMessage: st.pendingMessage, PendingGeneration: st.pendingGeneration,
		InProgress: st.inProgress, InProgressGeneration: st.inProgressGeneration,
	}
	if st.errMessage != "" {
		r.InProgressReason, r.InProgressMessage = allocation.ReasonError, st.errMessage
	}
	for _, rc := range runningResizable(pod, state) {
		if act, ok := k.alloc.Actuated(pod.UID, rc.spec.Name); ok {
			r.Actuated[rc.spec.Name] = act
		}
	}
	return r
}
