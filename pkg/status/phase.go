package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// podPhase follows upstream's getPhase: init containers first, then sidecars and app containers.
func podPhase(pod *v1.Pod, statuses []v1.ContainerStatus, terminal, initialized bool) v1.PodPhase {
	spec := &pod.Spec
	pendingInit, pendingSidecars, failedInit := 0, 0, 0
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0

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
			if st.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case st.State.Waiting != nil:
			if t := st.LastTerminationState.Terminated; t != nil {
				if t.ExitCode != 0 {
					failedInit++
				}
			} else {
				pendingInit++
			}
		default:
			pendingInit++
		}
	}

	for i := range spec.Containers {
		st, ok := findStatus(statuses, spec.Containers[i].Name)
		switch {
		case !ok:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}

	if failedInit > 0 && spec.RestartPolicy == v1.RestartPolicyNever {
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
		if spec.RestartPolicy == v1.RestartPolicyAlways {
			return v1.PodRunning // restarting
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		if spec.RestartPolicy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		return v1.PodRunning // OnFailure, restarting
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
