package podsync

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/podspec"
)

// killInfo says which container to stop and why.
type killInfo struct {
	name    string
	message string
	// grace, when set, replaces the pod's grace period (a probe's terminationGracePeriodSeconds).
	grace *int64
}

// podActions is what one sync must do to make the runtime match the pod.
type podActions struct {
	// KillPod: stop every container and sandbox (the sandbox is replaced, or nothing will run again).
	KillPod bool
	// CreateSandbox: run a new sandbox with Attempt.
	CreateSandbox bool
	// SandboxChanged: an existing sandbox is being replaced.
	SandboxChanged bool
	Attempt        uint32
	// SandboxID is the ready sandbox to start containers in (when not creating one).
	SandboxID string
	// InitToStart are indexes into spec.initContainers to start, in order (sidecars and at most one regular
	// init container).
	InitToStart []int
	// ContainersToStart are indexes into spec.containers.
	ContainersToStart []int
	// EphemeralToStart are indexes into spec.ephemeralContainers: those never started (they never restart).
	EphemeralToStart []int
	// ContainersToKill are running containers to stop, by ID.
	ContainersToKill map[string]killInfo
}

// computePodActions decides what a sync does, following upstream's computePodActions. It is pure.
func computePodActions(pod *v1.Pod, state *pleg.PodState) podActions {
	a := podActions{ContainersToKill: map[string]killInfo{}}
	if state == nil {
		state = &pleg.PodState{}
	}
	create, attempt, sandboxID, changed := sandboxChanged(pod, state)
	if create {
		all := byName(state, "")
		a.Attempt, a.SandboxChanged = attempt, changed
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever && attempt != 0 && len(state.Containers) != 0 {
			// The pod ran and must not run again: only make sure nothing is left running.
			a.KillPod = changed
			return a
		}
		var toStart []int
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if latest := first(all[c.Name]); podfacts.RunsOnce(c, &pod.Spec) && latest != nil &&
				latest.State == runtimeapi.ContainerState_CONTAINER_EXITED && latest.ExitCode == 0 {
				continue
			}
			toStart = append(toStart, i)
		}
		if len(toStart) == 0 && anyAppContainer(pod, all) {
			a.KillPod = changed // initialized and nothing left to run: no new sandbox
			return a
		}
		a.KillPod = changed
		a.CreateSandbox = true
		if len(pod.Spec.InitContainers) > 0 {
			a.InitToStart = []int{0}
			return a
		}
		a.ContainersToStart = toStart
		return a
	}

	a.SandboxID, a.Attempt = sandboxID, attempt
	// Ephemeral containers start even while initialization is not complete, and only once: an instance in
	// any sandbox means the container ran.
	all := byName(state, "")
	for i := range pod.Spec.EphemeralContainers {
		if len(all[pod.Spec.EphemeralContainers[i].Name]) == 0 {
			a.EphemeralToStart = append(a.EphemeralToStart, i)
		}
	}
	cur := byName(state, sandboxID)
	killOlderInstances(cur, &a)
	initialized, failed := computeInitActions(pod, cur, &a)
	if failed {
		a.KillPod = true
		a.InitToStart, a.EphemeralToStart = nil, nil
		return a
	}
	if !initialized {
		return a
	}
	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		latest := first(cur[c.Name])
		if latest == nil || latest.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			if shouldRestart(pod, c, latest) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if latest != nil && latest.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
					a.ContainersToKill[latest.Id] = killInfo{name: c.Name, message: "Container is in unknown state, try killing it before restart"}
				}
			}
			continue
		}
		if latest.Annotations[podfacts.AnnotationContainerHash] != podspec.HashContainer(c) {
			a.ContainersToKill[latest.Id] = killInfo{name: c.Name, message: fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)}
			if podfacts.RestartsWhenKilled(c, &pod.Spec) {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
			continue
		}
		keep++
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		// Nothing runs or will run: stop the sidecars, the ephemeral containers and the sandbox; the pod is done.
		a.KillPod = true
		a.InitToStart, a.EphemeralToStart = nil, nil
	}
	return a
}

// killOlderInstances stops every running instance of a container but its newest. There is one at a time,
// except when a start was cut off mid-way (containerd killed while the task started: the call failed, its undo
// could not reach containerd, the process ran on) and the next sync started the container again. A newer
// instance that never started does not count (podfacts.NewestFirst puts the running one first).
func killOlderInstances(cur map[string][]*runtimeapi.ContainerStatus, a *podActions) {
	for name, list := range cur {
		for _, older := range list[min(1, len(list)):] {
			if older.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				a.ContainersToKill[older.Id] = killInfo{name: name,
					message: fmt.Sprintf("Container %s has a newer instance running, stopping this one", name)}
			}
		}
	}
}

// computeInitActions adds the init containers to start to a. It reports whether initialization is complete,
// and whether it failed for good (an init container failed and the pod never restarts).
func computeInitActions(pod *v1.Pod, cur map[string][]*runtimeapi.ContainerStatus, a *podActions) (bool, bool) {
	initialized := anyAppContainer(pod, cur)
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		latest := first(cur[c.Name])
		if podfacts.IsSidecar(c) {
			if latest != nil && latest.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				if latest.Annotations[podfacts.AnnotationContainerHash] == podspec.HashContainer(c) {
					continue
				}
				a.ContainersToKill[latest.Id] = killInfo{name: c.Name, message: fmt.Sprintf("Init container %s definition changed, will be restarted", c.Name)}
			} else if latest != nil && latest.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
				a.ContainersToKill[latest.Id] = killInfo{name: c.Name, message: "Container is in unknown state, try killing it before restart"}
			}
			a.InitToStart = append(a.InitToStart, i)
			if !initialized {
				return false, false // one sidecar at a time while initializing
			}
			continue
		}
		if initialized {
			continue // regular init containers never run again once app containers ran
		}
		if latest == nil {
			a.InitToStart = append(a.InitToStart, i)
			return false, false
		}
		switch latest.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			return false, false
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			if latest.ExitCode == 0 {
				continue
			}
			if !podfacts.ContainerShouldRestart(c, &pod.Spec, latest.ExitCode) {
				return false, true
			}
		default:
			a.ContainersToKill[latest.Id] = killInfo{name: c.Name, message: "Init container is in unknown state, try killing it before restart"}
		}
		a.InitToStart = append(a.InitToStart, i)
		return false, false
	}
	return true, false
}

// shouldRestart follows upstream's ShouldContainerBeRestarted for a container that is not running: an
// exited one by its restart rules and policies (ContainerRestartRules).
func shouldRestart(pod *v1.Pod, c *v1.Container, latest *runtimeapi.ContainerStatus) bool {
	if latest == nil {
		return true
	}
	switch latest.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return false
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return podfacts.ContainerShouldRestart(c, &pod.Spec, latest.ExitCode)
	}
	return true
}

// sandboxChanged reports whether the pod needs a new sandbox (and which attempt), or which sandbox to use.
// changed is true when an existing sandbox is being replaced.
func sandboxChanged(pod *v1.Pod, state *pleg.PodState) (create bool, attempt uint32, id string, changed bool) {
	sbs := sortedSandboxes(state)
	if len(sbs) == 0 {
		return true, 0, "", false
	}
	latest := sbs[0]
	next := latest.GetMetadata().GetAttempt() + 1
	ready := 0
	for _, s := range sbs {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	if ready > 1 || latest.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return true, next, "", true
	}
	if opts := latest.GetLinux().GetNamespaces().GetOptions(); opts != nil {
		want := runtimeapi.NamespaceMode_POD
		if pod.Spec.HostNetwork {
			want = runtimeapi.NamespaceMode_NODE
		}
		if opts.Network != want {
			return true, next, "", true
		}
	}
	if !pod.Spec.HostNetwork && latest.GetNetwork().GetIp() == "" {
		return true, next, "", true
	}
	return false, latest.GetMetadata().GetAttempt(), latest.Id, false
}

// sortedSandboxes returns the pod's sandboxes, newest first.
func sortedSandboxes(state *pleg.PodState) []*runtimeapi.PodSandboxStatus {
	out := append([]*runtimeapi.PodSandboxStatus(nil), state.Sandboxes...)
	sort.SliceStable(out, func(i, j int) bool {
		ai, aj := out[i].GetMetadata().GetAttempt(), out[j].GetMetadata().GetAttempt()
		if ai != aj {
			return ai > aj
		}
		return out[i].CreatedAt > out[j].CreatedAt
	})
	return out
}

// byName groups the pod's containers by name, newest first; with sandboxID set, only that sandbox's.
func byName(state *pleg.PodState, sandboxID string) map[string][]*runtimeapi.ContainerStatus {
	out := map[string][]*runtimeapi.ContainerStatus{}
	for _, c := range state.Containers {
		if sandboxID != "" && state.SandboxOf[c.Id] != sandboxID {
			continue
		}
		name := c.GetMetadata().GetName()
		out[name] = append(out[name], c)
	}
	for _, list := range out {
		podfacts.NewestFirst(list)
	}
	return out
}

func first(list []*runtimeapi.ContainerStatus) *runtimeapi.ContainerStatus {
	if len(list) == 0 {
		return nil
	}
	return list[0]
}

// anyAppContainer reports whether any app container of the pod exists in the given set.
func anyAppContainer(pod *v1.Pod, set map[string][]*runtimeapi.ContainerStatus) bool {
	for _, c := range pod.Spec.Containers {
		if len(set[c.Name]) > 0 {
			return true
		}
	}
	return false
}
