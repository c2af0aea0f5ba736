package podfacts

// Labels and annotations the kubelet puts on CRI sandboxes and containers, as upstream names them
// (pkg/kubelet/types/labels.go and kuberuntime/labels.go). The kubelet, its PLEG, its endpoint and the
// built-in runtime all read them.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
	// LabelContainerType tells init containers, sidecars and app containers apart (not upstream's).
	LabelContainerType = "io.kubernetes.container.type"

	AnnotationContainerHash              = "io.kubernetes.container.hash"
	AnnotationContainerRestartCount      = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath     = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy   = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPreStopHandler             = "io.kubernetes.container.preStopHandler"
	AnnotationPodTerminationGracePeriod  = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerPorts             = "io.kubernetes.container.ports"
	AnnotationTerminationMessageHostPath = "io.kubernetes.container.terminationMessageHostPath"
)
