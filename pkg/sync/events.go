package podsync

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// Event reasons, as upstream names them.
const (
	eventPulling                = "Pulling"
	eventPulled                 = "Pulled"
	eventCreated                = "Created"
	eventStarted                = "Started"
	eventKilling                = "Killing"
	eventBackOff                = "BackOff"
	eventFailed                 = "Failed"
	eventFailedCreateSandbox    = "FailedCreatePodSandBox"
	eventSandboxChanged         = "SandboxChanged"
	eventErrImageNeverPull      = "ErrImageNeverPull"
	eventInspectFailed          = "InspectFailed"
	eventFailedPostStartHook    = "FailedPostStartHook"
	eventFailedPreStopHook      = "FailedPreStopHook"
	eventDeadlineExceeded       = "DeadlineExceeded"
	eventFailedMountVolume      = "FailedMount"
	eventFailedPullSecret       = "FailedToRetrieveImagePullSecret"
	eventFailedKillPod          = "FailedKillPod"
	eventFailedCreatePodCgroups = "FailedCreatePodContainer"
)

// podRef returns the reference events about a pod (or one of its containers, when fieldPath is set) use.
func podRef(pod *v1.Pod, fieldPath string) *v1.ObjectReference {
	return &v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: fieldPath,
	}
}

// containerRef returns the reference of one container of pod.
func containerRef(pod *v1.Pod, c *v1.Container) *v1.ObjectReference {
	path := fmt.Sprintf("spec.containers{%s}", c.Name)
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			path = fmt.Sprintf("spec.initContainers{%s}", c.Name)
		}
	}
	return podRef(pod, path)
}

// discardRecorder drops events (a FakeRecorder without a channel).
func discardRecorder() record.EventRecorder { return &record.FakeRecorder{} }
