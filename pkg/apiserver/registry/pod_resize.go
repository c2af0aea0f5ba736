package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// ResizeStrategy is implemented by kinds with a resize subresource (pods/resize).
type ResizeStrategy interface {
	// PrepareForResize returns the object a resize stores: old with only what a resize may change taken from
	// obj.
	PrepareForResize(obj, old runtime.Object) runtime.Object
	ValidateResize(obj, old runtime.Object) field.ErrorList
}

var _ ResizeStrategy = podStrategy{}

// PrepareForResize keeps everything of the stored pod but its containers' resources and resize policies,
// as upstream's resize strategy does; a changed spec bumps the generation. Containers added, removed or
// renamed are left for ValidateResize to refuse.
func (podStrategy) PrepareForResize(obj, old runtime.Object) runtime.Object {
	pod, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	if !sameNames(pod.Spec.Containers, o.Spec.Containers) || !sameNames(pod.Spec.InitContainers, o.Spec.InitContainers) {
		out := pod.DeepCopy()
		out.Status = o.Status
		return out
	}
	out := o.DeepCopy()
	for i := range out.Spec.Containers {
		out.Spec.Containers[i].Resources = *pod.Spec.Containers[i].Resources.DeepCopy()
		out.Spec.Containers[i].ResizePolicy = pod.Spec.Containers[i].ResizePolicy
	}
	for i := range out.Spec.InitContainers {
		out.Spec.InitContainers[i].Resources = *pod.Spec.InitContainers[i].Resources.DeepCopy()
		out.Spec.InitContainers[i].ResizePolicy = pod.Spec.InitContainers[i].ResizePolicy
	}
	if !equality.Semantic.DeepEqual(out.Spec, o.Spec) {
		out.Generation = o.Generation + 1
	}
	return out
}

func sameNames(a, b []corev1.Container) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

// ValidateResize refuses what upstream's ValidatePodResize refuses, in its words: static and Windows pods,
// a change of QoS class, containers added, removed, renamed or reordered, requests or limits removed, and
// any change but cpu and memory (of app and sidecar containers only).
func (podStrategy) ValidateResize(obj, old runtime.Object) field.ErrorList {
	pod, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	spec := field.NewPath("spec")
	errs := validateMetaUpdate(obj, old)
	errs = append(errs, validatePodSpec(&pod.Spec, spec)...)
	if podfacts.IsMirror(o) {
		return append(errs, field.Forbidden(field.NewPath(""), "static pods cannot be resized"))
	}
	if o.Spec.OS != nil && o.Spec.OS.Name == corev1.Windows {
		return append(errs, field.Forbidden(field.NewPath(""), "windows pods cannot be resized"))
	}
	if podfacts.ComputeQOSClass(o) != podfacts.ComputeQOSClass(pod) {
		errs = append(errs, field.Invalid(spec, o.Status.QOSClass, "Pod QOS Class may not change as a result of resizing"))
	}
	// Resizing pod-level resources is alpha (off) in 1.35: a pod that has them is not resized at all.
	podLevel := func(p *corev1.Pod) bool {
		return p.Spec.Resources != nil && len(p.Spec.Resources.Requests)+len(p.Spec.Resources.Limits) > 0
	}
	if podLevel(o) || podLevel(pod) {
		return append(errs, field.Forbidden(field.NewPath(""),
			"resize of pods with pod-level resources is forbidden when InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled"))
	}
	for _, l := range []struct {
		name     string
		cur, old []corev1.Container
	}{{"containers", pod.Spec.Containers, o.Spec.Containers}, {"initContainers", pod.Spec.InitContainers, o.Spec.InitContainers}} {
		path := spec.Child(l.name)
		if len(l.cur) != len(l.old) {
			errs = append(errs, field.Forbidden(path, "containers may not be added or removed on resize"))
			continue
		}
		if !sameNames(l.cur, l.old) {
			errs = append(errs, field.Forbidden(path, "containers may not be renamed or reordered on resize"))
			continue
		}
		for i := range l.cur {
			errs = append(errs, validateContainerResize(&l.cur[i], &l.old[i], path.Index(i), l.name == "initContainers")...)
		}
	}
	return errs
}

func validateContainerResize(c, o *corev1.Container, path *field.Path, init bool) field.ErrorList {
	var errs field.ErrorList
	sidecar := init && podfacts.IsSidecar(o)
	if init && !sidecar {
		if !equality.Semantic.DeepEqual(c, o) {
			errs = append(errs, field.Forbidden(path, "resources for non-sidecar init containers are immutable"))
		}
		return errs
	}
	if len(o.Resources.Requests) > 0 && len(c.Resources.Requests) == 0 || dropped(c.Resources.Requests, o.Resources.Requests) {
		errs = append(errs, field.Forbidden(path.Child("resources", "requests"), "resource requests cannot be removed"))
	}
	if dropped(c.Resources.Limits, o.Resources.Limits) {
		errs = append(errs, field.Forbidden(path.Child("resources", "limits"), "resource limits cannot be removed"))
	}
	// Put cpu and memory back as they were: what remains different is not resizable.
	masked := c.DeepCopy()
	for _, l := range []struct{ cur, old *corev1.ResourceList }{
		{&masked.Resources.Requests, &o.Resources.Requests}, {&masked.Resources.Limits, &o.Resources.Limits},
	} {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if v, ok := (*l.old)[name]; ok {
				if *l.cur == nil {
					*l.cur = corev1.ResourceList{}
				}
				(*l.cur)[name] = v
			} else if *l.cur != nil {
				delete(*l.cur, name)
			}
		}
		if len(*l.cur) == 0 && len(*l.old) == 0 {
			*l.cur = *l.old
		}
	}
	if !equality.Semantic.DeepEqual(masked, o) {
		msg := "only cpu and memory resources are mutable"
		if sidecar {
			msg = "only cpu and memory resources for sidecar containers are mutable"
		}
		errs = append(errs, field.Forbidden(path, msg))
	}
	return errs
}

// dropped reports whether a resource of old is missing from cur.
func dropped(cur, old corev1.ResourceList) bool {
	for name := range old {
		if _, ok := cur[name]; !ok {
			return true
		}
	}
	return false
}
