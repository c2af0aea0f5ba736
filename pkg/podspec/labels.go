package podsync

import (
	"encoding/json"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// CRI labels and annotations, as upstream sets them.
const (
	labelPodName       = podfacts.LabelPodName
	labelPodNamespace  = podfacts.LabelPodNamespace
	labelPodUID        = podfacts.LabelPodUID
	labelContainerName = podfacts.LabelContainerName
	labelContainerType = podfacts.LabelContainerType

	annotationHash                = podfacts.AnnotationContainerHash
	annotationRestartCount        = podfacts.AnnotationContainerRestartCount
	annotationTerminationPath     = podfacts.AnnotationTerminationMessagePath
	annotationTerminationPolicy   = podfacts.AnnotationTerminationMessagePolicy
	annotationPreStop             = podfacts.AnnotationPreStopHandler
	annotationPodGracePeriod      = podfacts.AnnotationPodTerminationGracePeriod
	annotationContainerPorts      = podfacts.AnnotationContainerPorts
	annotationContainerLogMessage = podfacts.AnnotationTerminationMessageHostPath

	containerTypeInit      = "init"
	containerTypeSidecar   = "sidecar"
	containerTypeApp       = "app"
	containerTypeEphemeral = "ephemeral"
)

func sandboxLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[labelPodName] = pod.Name
	l[labelPodNamespace] = pod.Namespace
	l[labelPodUID] = string(pod.UID)
	return l
}

func containerLabels(pod *v1.Pod, name, kind string) map[string]string {
	return map[string]string{
		labelPodName:       pod.Name,
		labelPodNamespace:  pod.Namespace,
		labelPodUID:        string(pod.UID),
		labelContainerName: name,
		labelContainerType: kind,
	}
}

func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int32, hostMessagePath string) map[string]string {
	a := map[string]string{
		annotationHash:              hashContainer(c),
		annotationRestartCount:      strconv.Itoa(int(restartCount)),
		annotationTerminationPath:   c.TerminationMessagePath,
		annotationTerminationPolicy: string(c.TerminationMessagePolicy),
		annotationPodGracePeriod:    strconv.FormatInt(gracePeriodOf(pod, nil, nil), 10),
	}
	if hostMessagePath != "" {
		a[annotationContainerLogMessage] = hostMessagePath
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[annotationPreStop] = string(b)
		}
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[annotationContainerPorts] = string(b)
		}
	}
	return a
}

// preStopFromAnnotations reads the preStop hook recorded on a container (for pods whose spec is gone).
func preStopFromAnnotations(a map[string]string) *v1.LifecycleHandler {
	raw, ok := a[annotationPreStop]
	if !ok {
		return nil
	}
	var h v1.LifecycleHandler
	if json.Unmarshal([]byte(raw), &h) != nil {
		return nil
	}
	return &h
}

// containerType is a container kind's container_type label in upstream's metrics: a sidecar is an init
// container there too.
func containerType(kind string) string {
	switch kind {
	case containerTypeApp:
		return "container"
	case containerTypeEphemeral:
		return "ephemeral_container"
	}
	return "init_container"
}

// ephemeralSpec is the i-th ephemeral container of the pod, as a container.
func ephemeralSpec(pod *v1.Pod, i int) *v1.Container {
	return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
}
