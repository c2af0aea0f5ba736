package debugpage

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestWhyNotReady(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox:1.35"}}}}
	withSidecar := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "proxy", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}},
		Containers:     []v1.Container{{Name: "app"}}}}
	withGate := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}},
		ReadinessGates: []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}}}
	running := func(ready bool) v1.ContainerStatus {
		return v1.ContainerStatus{Name: "app", Image: "busybox:1.35", Ready: ready, Started: ptr.To(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	}
	waiting := func(reason, msg string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: "app", Image: "busybox:1.35", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}}
	}
	st := func(phase v1.PodPhase, ready v1.ConditionStatus, cs ...v1.ContainerStatus) v1.PodStatus {
		return v1.PodStatus{Phase: phase, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: ready}}, ContainerStatuses: cs}
	}
	crashed := waiting("CrashLoopBackOff", "back-off 20s restarting failed container")
	crashed.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}
	startup := running(false)
	startup.Started = ptr.To(false)

	for _, tc := range []struct {
		name string
		f    Facts
		want string
	}{
		{"ready", Facts{Pod: pod, State: "Syncing", Status: st(v1.PodRunning, v1.ConditionTrue, running(true))}, ""},
		{"no spec", Facts{}, "the kubelet has no spec for this pod"},
		{"not admitted", Facts{Pod: pod, Rejected: "OutOfmemory: Node didn't have enough resource: memory"},
			"not admitted: OutOfmemory: Node didn't have enough resource: memory"},
		{"terminating", Facts{Pod: pod, State: "Terminating", TerminatingSince: now.Add(-12 * time.Second), Grace: 30 * time.Second, Now: now},
			"terminating for 12s of its 30s grace period"},
		{"completed", Facts{Pod: pod, State: "Terminated", Status: st(v1.PodSucceeded, v1.ConditionFalse)}, "the pod has completed"},
		{"failed", Facts{Pod: pod, State: "Terminated", Status: v1.PodStatus{Phase: v1.PodFailed, Reason: "Terminated", Message: "Pod was terminated in response to imminent node shutdown."}},
			"the pod has failed: Terminated: Pod was terminated in response to imminent node shutdown."},
		{"volume", Facts{Pod: pod, State: "Syncing", MountFailure: `MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found`},
			`its volumes cannot be set up: MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found`},
		{"never synced", Facts{Pod: pod, State: "Pending"}, "waiting for the kubelet to sync it"},
		{"pulling", Facts{Pod: pod, State: "Syncing", Now: now, Status: st(v1.PodPending, v1.ConditionFalse, waiting("ContainerCreating", "")),
			Pulls: []Pull{{Image: "busybox:1.35", Since: now.Add(-7 * time.Second), Bytes: 1234567}}},
			"waiting for image busybox:1.35 to be pulled (7s so far, 1234567 bytes)"},
		{"image back-off", Facts{Pod: pod, State: "Syncing", Now: now, Status: st(v1.PodPending, v1.ConditionFalse, waiting("ImagePullBackOff", `Back-off pulling image "busybox:1.35"`)),
			Backoffs: []Backoff{{What: "image busybox:1.35", Until: now.Add(40 * time.Second)}}},
			`image busybox:1.35 cannot be pulled: next try at 10:00:40 (in 40s); Back-off pulling image "busybox:1.35"`},
		{"pull error", Facts{Pod: pod, State: "Syncing", Status: st(v1.PodPending, v1.ConditionFalse, waiting("ErrImagePull", "not found"))},
			"image busybox:1.35 cannot be pulled: ErrImagePull: not found"},
		{"crash loop", Facts{Pod: pod, State: "Syncing", Now: now, Status: st(v1.PodRunning, v1.ConditionFalse, crashed),
			Backoffs: []Backoff{{What: "container app", Until: now.Add(15 * time.Second)}}},
			"container app keeps crashing (last exit code 3, Error): next restart at 10:00:15 (in 15s)"},
		{"config error", Facts{Pod: pod, State: "Syncing", Status: st(v1.PodPending, v1.ConditionFalse, waiting("CreateContainerConfigError", `secret "db" not found`))},
			`container app cannot start: CreateContainerConfigError: secret "db" not found`},
		{"init failed", Facts{Pod: pod, State: "Syncing", Status: v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{{Name: "init-db", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}},
			"init container 1 (init-db) failed with exit code 1 (Error)"},
		{"sidecar", Facts{Pod: withSidecar, State: "Syncing", Status: v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{{Name: "proxy", Started: ptr.To(false), State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}},
			"waiting for sidecar proxy to start"},
		{"readiness", Facts{Pod: pod, State: "Syncing", Status: st(v1.PodRunning, v1.ConditionFalse, running(false)),
			Probes: []Probe{{Container: "app", Type: "Readiness", Output: "HTTP probe failed with statuscode: 503\n"}}},
			"the readiness probe of container app fails: HTTP probe failed with statuscode: 503"},
		{"startup", Facts{Pod: pod, State: "Syncing", Status: st(v1.PodRunning, v1.ConditionFalse, startup)},
			"container app has not passed its startup probe"},
		{"gate", Facts{Pod: withGate, State: "Syncing", Status: st(v1.PodRunning, v1.ConditionFalse, running(true))},
			"readiness gate example.com/lb is not True"},
		{"no containers yet", Facts{Pod: pod, State: "Syncing", Status: st(v1.PodPending, v1.ConditionFalse)},
			"waiting for the pod's sandbox and containers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WhyNotReady(tc.f); got != tc.want {
				t.Errorf("WhyNotReady = %q\nwant           %q", got, tc.want)
			}
			if strings.Contains(WhyNotReady(tc.f), "\n") {
				t.Error("the sentence spans lines")
			}
		})
	}
}

func TestMarkSlowest(t *testing.T) {
	steps := []Step{{Name: "a", Took: time.Millisecond}, {Name: "b", Took: time.Second}, {Name: "c", Took: 0}}
	MarkSlowest(steps)
	if !steps[1].Slowest || steps[0].Slowest || steps[2].Slowest {
		t.Errorf("%+v", steps)
	}
}
