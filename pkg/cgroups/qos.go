package cgroups

import (
	v1 "k8s.io/api/core/v1"
)

const (
	configSourceAnnotation = "kubernetes.io/config.source"
	configMirrorAnnotation = "kubernetes.io/config.mirror"
	apiserverSource        = "api"
	systemNodeCritical     = "system-node-critical"
	// systemCriticalPriority is upstream's scheduling.SystemCriticalPriority.
	systemCriticalPriority = int32(2000000000)
)

// QOSClass returns the pod's QoS class as upstream computes it
// (ComputePodQOS): pod-level resources decide when the pod sets them;
// otherwise BestEffort when no container sets CPU or memory requests or
// limits, Guaranteed when every container (init containers included) sets
// both with requests equal to limits, Burstable otherwise. Status.QOSClass,
// when set, wins, as in upstream's GetPodQOS: the class never changes once
// a pod has one.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputeQOSClass(pod)
}

// ComputeQOSClass is QOSClass without the status shortcut.
func ComputeQOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Spec.Resources != nil {
		return resourceQOS(pod.Spec.Resources)
	}
	var podQOS v1.PodQOSClass
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			qos := resourceQOS(&list[i].Resources)
			switch {
			case qos == v1.PodQOSBurstable:
				return qos
			case podQOS == "":
				podQOS = qos
			case podQOS != qos:
				return v1.PodQOSBurstable
			}
		}
	}
	if podQOS == "" {
		return v1.PodQOSBestEffort
	}
	return podQOS
}

// resourceQOS is the class of one set of requirements, for CPU and memory.
func resourceQOS(r *v1.ResourceRequirements) v1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return v1.PodQOSBestEffort
	}
	var qos v1.PodQOSClass
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		if !req.Equal(lim) {
			return v1.PodQOSBurstable
		}
		bestEffort := req.IsZero() && lim.IsZero()
		switch {
		case qos == "" && bestEffort:
			qos = v1.PodQOSBestEffort
		case qos == "":
			qos = v1.PodQOSGuaranteed
		case bestEffort != (qos == v1.PodQOSBestEffort):
			return v1.PodQOSBurstable
		}
	}
	return qos
}

// isStaticPod reports whether the pod came from a source other than the
// API server (a manifest file or URL).
func isStaticPod(pod *v1.Pod) bool {
	source, ok := pod.Annotations[configSourceAnnotation]
	return ok && source != apiserverSource
}

// isCriticalPod follows upstream's kubelet types.IsCriticalPod.
func isCriticalPod(pod *v1.Pod) bool {
	if isStaticPod(pod) {
		return true
	}
	if _, ok := pod.Annotations[configMirrorAnnotation]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// isNodeCriticalPod follows upstream's kubelet types.IsNodeCriticalPod.
func isNodeCriticalPod(pod *v1.Pod) bool {
	return isCriticalPod(pod) && pod.Spec.PriorityClassName == systemNodeCritical
}
