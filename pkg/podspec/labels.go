package podspec

import (
	"encoding/json"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Kinds of container, as the kubelet's container_type label names them.
const (
	KindInit      = "init"
	KindSidecar   = "sidecar"
	KindApp       = "app"
	KindEphemeral = "ephemeral"
)

// SandboxLabels are a sandbox's CRI labels: the pod's labels and the pod's name, namespace and UID.
func SandboxLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[podfacts.LabelPodName] = pod.Name
	l[podfacts.LabelPodNamespace] = pod.Namespace
	l[podfacts.LabelPodUID] = string(pod.UID)
	return l
}

// ContainerLabels are a container's CRI labels: its pod's name, namespace and UID, its name and its kind.
func ContainerLabels(pod *v1.Pod, name, kind string) map[string]string {
	return map[string]string{
		podfacts.LabelPodName:       pod.Name,
		podfacts.LabelPodNamespace:  pod.Namespace,
		podfacts.LabelPodUID:        string(pod.UID),
		podfacts.LabelContainerName: name,
		podfacts.LabelContainerType: kind,
	}
}

// ContainerAnnotations are a container's CRI annotations, as upstream records them for when the spec is
// gone: its hash, restart count, termination message path and policy, the pod's grace period (gracePeriod
// seconds), the host file of its termination message ("" for none), its preStop hook and its ports.
func ContainerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int32, hostMessagePath string, gracePeriod int64) map[string]string {
	a := map[string]string{
		podfacts.AnnotationContainerHash:             HashContainer(c),
		podfacts.AnnotationContainerRestartCount:     strconv.Itoa(int(restartCount)),
		podfacts.AnnotationTerminationMessagePath:    c.TerminationMessagePath,
		podfacts.AnnotationTerminationMessagePolicy:  string(c.TerminationMessagePolicy),
		podfacts.AnnotationPodTerminationGracePeriod: strconv.FormatInt(gracePeriod, 10),
	}
	if hostMessagePath != "" {
		a[podfacts.AnnotationTerminationMessageHostPath] = hostMessagePath
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[podfacts.AnnotationPreStopHandler] = string(b)
		}
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[podfacts.AnnotationContainerPorts] = string(b)
		}
	}
	return a
}

// PreStopFromAnnotations reads the preStop hook recorded on a container (for pods whose spec is gone).
func PreStopFromAnnotations(a map[string]string) *v1.LifecycleHandler {
	raw, ok := a[podfacts.AnnotationPreStopHandler]
	if !ok {
		return nil
	}
	var h v1.LifecycleHandler
	if json.Unmarshal([]byte(raw), &h) != nil {
		return nil
	}
	return &h
}

// ContainerType is a container kind's container_type label in upstream's metrics: a sidecar is an init
// container there too.
func ContainerType(kind string) string {
	switch kind {
	case KindApp:
		return "container"
	case KindEphemeral:
		return "ephemeral_container"
	}
	return "init_container"
}

// EphemeralSpec is the i-th ephemeral container of the pod, as a container.
func EphemeralSpec(pod *v1.Pod, i int) *v1.Container {
	return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
}
