package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// podPhase follows upstream's getPhase with ContainerRestartRules on (1.35's default): init containers first,
// then sidecars and app containers; an exited container counts as restarting by its own restart rules and
// policy, else the pod's.
func podPhase(pod *v1.Pod, statuses []v1.ContainerStatus, terminal, initialized bool) v1.PodPhase {
	spec := &pod.Spec
	pendingInit, pendingSidecars, failedInitNotRestartable := 0, 0, 0
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded := 0, 0, 0, 0, 0, 0
	restarts := func(c *v1.Container, t *v1.ContainerStateTerminated) bool {
		return podfacts.ContainerShouldRestart(c, spec, t.ExitCode)
	}

	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		st, ok := findStatus(statuses, c.Name)
		if podfacts.IsSidecar(c) {
			switch {
			case !ok:
				unknown++
			case st.State.Running != nil:
				if st.Started == nil || !*st.Started {
					pendingSidecars++
				}
				running++
			case st.State.Terminated != nil:
				// A stopped sidecar does not count for the phase.
			case st.State.Waiting != nil:
				if st.LastTerminationState.Terminated == nil {
					pendingSidecars++
					waiting++
				}
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		switch {
		case !ok:
			pendingInit++
		case st.State.Running != nil:
			pendingInit++
		case st.State.Terminated != nil:
			if t := st.State.Terminated; t.ExitCode != 0 && !restarts(c, t) {
				failedInitNotRestartable++
			}
		case st.State.Waiting != nil:
			if t := st.LastTerminationState.Terminated; t != nil {
				if t.ExitCode != 0 && !restarts(c, t) {
					failedInitNotRestartable++
				}
			} else {
				pendingInit++
			}
		default:
			pendingInit++
		}
	}

	for i := range spec.Containers {
		c := &spec.Containers[i]
		st, ok := findStatus(statuses, c.Name)
		switch {
		case !ok:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if !restarts(c, st.State.Terminated) {
				stoppedNotRestartable++
			}
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if t := st.LastTerminationState.Terminated; t != nil {
				stopped++
				if !restarts(c, t) {
					stoppedNotRestartable++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}

	if failedInitNotRestartable > 0 {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !initialized):
		return v1.PodPending
	case waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if terminal && !podfacts.IsStatic(pod) {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if stopped != stoppedNotRestartable {
			return v1.PodRunning // at least one container restarts
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	default:
		return v1.PodPending
	}
}

// hasInitialized reports whether any app container has run, which means init containers finished once.
func hasInitialized(pod *v1.Pod, statuses []v1.ContainerStatus) bool {
	for _, c := range pod.Spec.Containers {
		st, ok := findStatus(statuses, c.Name)
		if !ok {
			continue
		}
		if st.ContainerID != "" || st.State.Running != nil || st.State.Terminated != nil ||
			st.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}
