package debugpage

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Facts are what the kubelet knows of a pod, for WhyNotReady.
type Facts struct {
	Pod    *v1.Pod
	Status v1.PodStatus
	// State is the pod worker's state ("Syncing", "Terminating", "Terminated", "Pending").
	State string
	// Rejected is why admission refused the pod ("" when it did not).
	Rejected string
	// MountFailure is why the pod's volumes could not be set up at the last sync ("" when they were).
	MountFailure string
	// Pulls are the image pulls under way for the pod.
	Pulls []Pull
	// Backoffs are the pod's container and image back-offs.
	Backoffs []Backoff
	// Probes are the last results of the pod's probes.
	Probes []Probe
	// TerminatingSince is when the pod began to terminate; Grace its grace period.
	TerminatingSince time.Time
	Grace            time.Duration
	Now              time.Time
}

// Pull is an image pull under way.
type Pull struct {
	Image string
	Since time.Time
	Bytes int64 // fetched so far; 0 when unknown
}

// WhyNotReady says in one plain sentence why the pod is not Ready, from what the kubelet knows; "" when it
// is Ready. It is a pure function.
func WhyNotReady(f Facts) string {
	if f.Pod == nil {
		return "the kubelet has no spec for this pod"
	}
	if condStatus(f.Status, v1.PodReady) == v1.ConditionTrue {
		return ""
	}
	switch {
	case f.Rejected != "":
		return "not admitted: " + f.Rejected
	case f.State == "Terminating":
		took := f.Now.Sub(f.TerminatingSince).Round(time.Second)
		return fmt.Sprintf("terminating for %v of its %v grace period", took, f.Grace.Round(time.Second))
	case f.Status.Phase == v1.PodSucceeded:
		return "the pod has completed"
	case f.Status.Phase == v1.PodFailed:
		return strings.TrimRight("the pod has failed: "+join(f.Status.Reason, f.Status.Message), ": ")
	case f.MountFailure != "":
		return "its volumes cannot be set up: " + f.MountFailure
	case f.State == "Pending" || f.State == "":
		return "waiting for the kubelet to sync it"
	}
	sidecars := map[string]bool{}
	for _, c := range f.Pod.Spec.InitContainers {
		if podfacts.IsSidecar(&c) {
			sidecars[c.Name] = true
		}
	}
	for i, cs := range f.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && !sidecars[cs.Name] {
			why := fmt.Sprintf("init container %d (%s) failed with exit code %d", i+1, cs.Name, t.ExitCode)
			if t.Reason != "" {
				why += " (" + t.Reason + ")"
			}
			return why
		}
		if s := waitingSentence(f, cs, "init container "+cs.Name); s != "" {
			return s
		}
		if sidecars[cs.Name] && (cs.Started == nil || !*cs.Started) {
			return "waiting for sidecar " + cs.Name + " to start"
		}
		if !sidecars[cs.Name] && cs.State.Terminated == nil {
			return fmt.Sprintf("init container %d (%s) has not completed", i+1, cs.Name)
		}
	}
	for _, cs := range f.Status.ContainerStatuses {
		if s := waitingSentence(f, cs, "container "+cs.Name); s != "" {
			return s
		}
	}
	for _, cs := range f.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.Ready {
			continue
		}
		if cs.Started != nil && !*cs.Started {
			return "container " + cs.Name + " has not passed its startup probe" + probeOutput(f.Probes, cs.Name, "Startup")
		}
		return "the readiness probe of container " + cs.Name + " fails" + probeOutput(f.Probes, cs.Name, "Readiness")
	}
	for _, g := range f.Pod.Spec.ReadinessGates {
		if condStatus(f.Status, g.ConditionType) != v1.ConditionTrue {
			return "readiness gate " + string(g.ConditionType) + " is not True"
		}
	}
	if len(f.Status.ContainerStatuses) == 0 {
		return "waiting for the pod's sandbox and containers"
	}
	return "waiting for the kubelet to report the pod Ready"
}

// waitingSentence says why a waiting container waits; "" when it does not.
func waitingSentence(f Facts, cs v1.ContainerStatus, what string) string {
	w := cs.State.Waiting
	if w == nil {
		return ""
	}
	switch w.Reason {
	case "CrashLoopBackOff":
		s := what + " keeps crashing"
		if t := cs.LastTerminationState.Terminated; t != nil {
			s += fmt.Sprintf(" (last exit code %d", t.ExitCode)
			if t.Reason != "" {
				s += ", " + t.Reason
			}
			s += ")"
		}
		if b, ok := backoffFor(f.Backoffs, "container "+cs.Name); ok {
			s += fmt.Sprintf(": next restart at %s (in %v)", b.Until.UTC().Format(time.TimeOnly), b.Until.Sub(f.Now).Round(time.Second))
		}
		return s
	case "ImagePullBackOff":
		s := "image " + cs.Image + " cannot be pulled"
		if b, ok := backoffFor(f.Backoffs, "image "+cs.Image); ok {
			s += fmt.Sprintf(": next try at %s (in %v)", b.Until.UTC().Format(time.TimeOnly), b.Until.Sub(f.Now).Round(time.Second))
		}
		if w.Message != "" {
			s += "; " + w.Message
		}
		return s
	case "ErrImagePull", "ErrImageNeverPull", "InvalidImageName":
		return "image " + cs.Image + " cannot be pulled: " + join(w.Reason, w.Message)
	case "ContainerCreating", "PodInitializing", "":
		for _, p := range f.Pulls {
			if p.Image == cs.Image || strings.HasSuffix(cs.Image, p.Image) || strings.HasSuffix(p.Image, cs.Image) {
				s := fmt.Sprintf("waiting for image %s to be pulled (%v so far", p.Image, f.Now.Sub(p.Since).Round(time.Second))
				if p.Bytes > 0 {
					s += fmt.Sprintf(", %d bytes", p.Bytes)
				}
				return s + ")"
			}
		}
		return what + " is being created"
	}
	return what + " cannot start: " + join(w.Reason, w.Message)
}

func backoffFor(bs []Backoff, what string) (Backoff, bool) {
	for _, b := range bs {
		if b.What == what {
			return b, true
		}
	}
	return Backoff{}, false
}

func probeOutput(ps []Probe, container, typ string) string {
	for _, p := range ps {
		if p.Container == container && p.Type == typ && p.Output != "" {
			return ": " + strings.TrimSpace(p.Output)
		}
	}
	return ""
}

func condStatus(st v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func join(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}
