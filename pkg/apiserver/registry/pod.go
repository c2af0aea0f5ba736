package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

type podStrategy struct{}

func (podStrategy) PrepareForCreate(obj runtime.Object) {
	pod := obj.(*corev1.Pod)
	DefaultPod(pod)
	pod.Generation = 1
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podfacts.ComputeQOSClass(pod)}
}

func (podStrategy) PrepareForUpdate(obj, old runtime.Object) {
	pod, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	pod.Status = o.Status
	DefaultPodSpec(&pod.Spec)
	if !equality.Semantic.DeepEqual(pod.Spec, o.Spec) {
		pod.Generation = o.Generation + 1
	} else {
		pod.Generation = o.Generation
	}
}

func (podStrategy) Validate(obj runtime.Object) field.ErrorList {
	pod := obj.(*corev1.Pod)
	errs := validateMeta(obj, true, apivalidation.NameIsDNSSubdomain)
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "ephemeralContainers"), "cannot be set on create"))
	}
	errs = append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
	errs = append(errs, validatePodClaims(pod, field.NewPath("spec"))...)
	return append(errs, validateEphemeralClaimNames(pod, field.NewPath("spec", "volumes"))...)
}

// podUpdateForbidden is upstream's message for a forbidden pod spec change.
const podUpdateForbidden = "pod updates may not change fields other than `spec.containers[*].image`," +
	"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` " +
	"(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` " +
	"(allow it to be set to 1 if it was previously negative)"

func (podStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	pod, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	errs := validateMetaUpdate(obj, old)
	errs = append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
	errs = append(errs, validatePodClaims(pod, field.NewPath("spec"))...)
	munged := pod.Spec.DeepCopy()
	if len(munged.Containers) == len(o.Spec.Containers) {
		for i := range munged.Containers {
			munged.Containers[i].Image = o.Spec.Containers[i].Image
		}
	}
	if len(munged.InitContainers) == len(o.Spec.InitContainers) {
		for i := range munged.InitContainers {
			munged.InitContainers[i].Image = o.Spec.InitContainers[i].Image
		}
	}
	munged.ActiveDeadlineSeconds = o.Spec.ActiveDeadlineSeconds
	if tolerationsAdded(o.Spec.Tolerations, munged.Tolerations) {
		munged.Tolerations = o.Spec.Tolerations
	}
	if g := o.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 && munged.TerminationGracePeriodSeconds != nil &&
		*munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = g
	}
	if len(o.Spec.SchedulingGates) > 0 && len(munged.SchedulingGates) < len(o.Spec.SchedulingGates) {
		munged.SchedulingGates = o.Spec.SchedulingGates
	}
	if !equality.Semantic.DeepEqual(*munged, o.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), podUpdateForbidden))
	}
	return errs
}

func tolerationsAdded(old, cur []corev1.Toleration) bool {
	for _, t := range old {
		found := false
		for _, u := range cur {
			if equality.Semantic.DeepEqual(t, u) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (podStrategy) Fields(obj runtime.Object) fields.Set {
	pod := obj.(*corev1.Pod)
	host := "false"
	if pod.Spec.HostNetwork {
		host = "true"
	}
	return fields.Set{
		"metadata.name":            pod.Name,
		"metadata.namespace":       pod.Namespace,
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         host,
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             pod.Status.PodIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

func (podStrategy) CopyStatus(dst, src runtime.Object) {
	dst.(*corev1.Pod).Status = src.(*corev1.Pod).Status
}

func (podStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	pod := obj.(*corev1.Pod)
	errs := validateMetaUpdate(obj, old)
	switch pod.Status.Phase {
	case "", corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("status", "phase"), pod.Status.Phase,
			[]string{"Pending", "Running", "Succeeded", "Failed", "Unknown"}))
	}
	if o := old.(*corev1.Pod); isTerminal(o.Status.Phase) && pod.Status.Phase != o.Status.Phase {
		errs = append(errs, field.Forbidden(field.NewPath("status", "phase"),
			"cannot transition from a terminal phase"))
	}
	errs = append(errs, validateContainerStatusUsers(pod, field.NewPath("status"))...)
	return append(errs, validatePodResourceClaimStatuses(pod, field.NewPath("status", "resourceClaimStatuses"))...)
}

func isTerminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }
