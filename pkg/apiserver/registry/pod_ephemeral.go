package registry

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// EphemeralContainersStrategy is implemented by kinds with an ephemeralcontainers subresource
// (pods/ephemeralcontainers, which kubectl debug patches).
type EphemeralContainersStrategy interface {
	// PrepareForEphemeralContainers returns the object the subresource stores: old with obj's ephemeral
	// containers.
	PrepareForEphemeralContainers(obj, old runtime.Object) runtime.Object
	ValidateEphemeralContainersUpdate(obj, old runtime.Object) field.ErrorList
}

var _ EphemeralContainersStrategy = podStrategy{}

// PrepareForEphemeralContainers keeps everything of the stored pod but spec.ephemeralContainers (defaulted
// as every container is), as upstream's ephemeral containers strategy does; a change bumps the generation.
func (podStrategy) PrepareForEphemeralContainers(obj, old runtime.Object) runtime.Object {
	pod, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	out := o.DeepCopy()
	out.Spec.EphemeralContainers = nil
	for i := range pod.Spec.EphemeralContainers {
		ec := *pod.Spec.EphemeralContainers[i].DeepCopy()
		defaultContainer((*corev1.Container)(&ec.EphemeralContainerCommon), out.Spec.HostNetwork)
		out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers, ec)
	}
	if !equality.Semantic.DeepEqual(out.Spec, o.Spec) {
		out.Generation = o.Generation + 1
	}
	return out
}

// ValidateEphemeralContainersUpdate refuses what upstream's ValidatePodEphemeralContainersUpdate refuses:
// static pods, an existing ephemeral container changed or removed, and any invalid new one (see
// validateEphemeralContainers).
func (podStrategy) ValidateEphemeralContainersUpdate(obj, old runtime.Object) field.ErrorList {
	pod, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	if podfacts.IsMirror(o) {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	errs := validateMetaUpdate(obj, old)
	errs = append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
	path := field.NewPath("spec", "ephemeralContainers")
	byName := map[string]*corev1.EphemeralContainer{}
	for i := range pod.Spec.EphemeralContainers {
		byName[pod.Spec.EphemeralContainers[i].Name] = &pod.Spec.EphemeralContainers[i]
	}
	for i := range o.Spec.EphemeralContainers {
		was := &o.Spec.EphemeralContainers[i]
		now, ok := byName[was.Name]
		switch {
		case !ok:
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("existing ephemeral containers %q may not be removed", was.Name)))
		case !equality.Semantic.DeepEqual(was, now):
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("existing ephemeral containers %q may not be changed", was.Name)))
		}
	}
	return errs
}

// validateEphemeralContainers checks spec.ephemeralContainers as upstream does: each a valid container
// whose name is unique among all the pod's containers, whose targetContainerName names one of its
// containers or init containers, and which sets none of what an ephemeral container may not have (ports,
// resources, probes, lifecycle, a restart policy, subPath mounts).
func validateEphemeralContainers(s *corev1.PodSpec, path *field.Path, names, vols sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	targets := names.Clone()
	for i := range s.EphemeralContainers {
		ec := &s.EphemeralContainers[i]
		p := path.Index(i)
		c := (*corev1.Container)(&ec.EphemeralContainerCommon)
		errs = append(errs, validateContainer(c, p, names, vols)...)
		if ec.TargetContainerName != "" && !targets.Has(ec.TargetContainerName) {
			errs = append(errs, field.NotFound(p.Child("targetContainerName"), ec.TargetContainerName))
		}
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"ports", len(c.Ports) > 0},
			{"resources", len(c.Resources.Limits)+len(c.Resources.Requests)+len(c.Resources.Claims) > 0},
			{"resizePolicy", len(c.ResizePolicy) > 0},
			{"restartPolicy", c.RestartPolicy != nil},
			{"restartPolicyRules", len(c.RestartPolicyRules) > 0},
			{"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil},
			{"startupProbe", c.StartupProbe != nil},
			{"lifecycle", c.Lifecycle != nil},
		} {
			if f.set {
				errs = append(errs, field.Forbidden(p.Child(f.name), "cannot be set for an Ephemeral Container"))
			}
		}
		for j, m := range c.VolumeMounts {
			if m.SubPath != "" {
				errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPath"), "cannot be set for an Ephemeral Container"))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPathExpr"), "cannot be set for an Ephemeral Container"))
			}
		}
	}
	return errs
}
