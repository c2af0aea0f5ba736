package podfacts

import v1 "k8s.io/api/core/v1"

// Annotations the kubelet reads and writes on pods, as upstream names them (k8s.io/kubelet types).
const (
	// AnnotationConfigSource says where a pod came from: "api", or "file" for a static pod.
	AnnotationConfigSource = "kubernetes.io/config.source"
	// AnnotationConfigMirror marks the API's mirror of a static pod; its value is the static pod's hash.
	AnnotationConfigMirror = "kubernetes.io/config.mirror"
	// AnnotationConfigHash is a static pod's content hash, which names its UID.
	AnnotationConfigHash = "kubernetes.io/config.hash"
	// AnnotationConfigSeen is when the kubelet first saw a static pod.
	AnnotationConfigSeen = "kubernetes.io/config.seen"

	// SourceAPI and SourceFile are the values of AnnotationConfigSource.
	SourceAPI  = "api"
	SourceFile = "file"

	// SystemNodeCritical is the priority class of node-critical pods.
	SystemNodeCritical = "system-node-critical"
	// SystemCriticalPriority is upstream's scheduling.SystemCriticalPriority.
	SystemCriticalPriority = int32(2000000000)
)

// IsStatic reports whether a pod came from a source other than the API server (a manifest file).
func IsStatic(pod *v1.Pod) bool {
	src, ok := pod.Annotations[AnnotationConfigSource]
	return ok && src != SourceAPI
}

// IsMirror reports whether an API pod is the mirror of a static pod.
func IsMirror(pod *v1.Pod) bool {
	_, ok := pod.Annotations[AnnotationConfigMirror]
	return ok
}

// IsCritical follows upstream's kubelet types.IsCriticalPod: static and mirror pods, and pods of at least
// the system-critical priority.
func IsCritical(pod *v1.Pod) bool {
	if IsStatic(pod) || IsMirror(pod) {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// IsNodeCritical follows upstream's kubelet types.IsNodeCriticalPod.
func IsNodeCritical(pod *v1.Pod) bool {
	return IsCritical(pod) && pod.Spec.PriorityClassName == SystemNodeCritical
}
