package registry

import (
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NamespaceNameLabel is the label upstream puts on every namespace.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

type namespaceStrategy struct{}

func (namespaceStrategy) PrepareForCreate(obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
	setNamespaceLabel(ns)
}

func (namespaceStrategy) PrepareForUpdate(obj, old runtime.Object) {
	ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	ns.Status = o.Status
	ns.Spec.Finalizers = o.Spec.Finalizers
	setNamespaceLabel(ns)
}

func setNamespaceLabel(ns *corev1.Namespace) {
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[NamespaceNameLabel] = ns.Name
}

func (namespaceStrategy) Validate(obj runtime.Object) field.ErrorList {
	return validateMeta(obj, false, apivalidation.ValidateNamespaceName)
}

func (namespaceStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return validateMetaUpdate(obj, old)
}

func (namespaceStrategy) Fields(obj runtime.Object) fields.Set {
	ns := obj.(*corev1.Namespace)
	return fields.Set{"metadata.name": ns.Name, "status.phase": string(ns.Status.Phase)}
}

func (namespaceStrategy) CopyStatus(dst, src runtime.Object) {
	dst.(*corev1.Namespace).Status = src.(*corev1.Namespace).Status
}

func (namespaceStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	return validateMetaUpdate(obj, old)
}

type nodeStrategy struct{}

func (nodeStrategy) PrepareForCreate(obj runtime.Object) {
	n := obj.(*corev1.Node)
	n.Spec.ConfigSource = nil //nolint:staticcheck // cleared as upstream does
	n.Status.Config = nil
}

func (nodeStrategy) PrepareForUpdate(obj, old runtime.Object) {
	obj.(*corev1.Node).Status = old.(*corev1.Node).Status
}

func (nodeStrategy) Validate(obj runtime.Object) field.ErrorList {
	errs := validateMeta(obj, false, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateTaints(obj.(*corev1.Node).Spec.Taints, field.NewPath("spec", "taints"))...)
}

func (s nodeStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	errs := validateMetaUpdate(obj, old)
	n, o := obj.(*corev1.Node), old.(*corev1.Node)
	if o.Spec.PodCIDR != "" && n.Spec.PodCIDR != o.Spec.PodCIDR {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDR"), "node updates may not change podCIDR except from \"\" to valid"))
	}
	return append(errs, validateTaints(n.Spec.Taints, field.NewPath("spec", "taints"))...)
}

func (nodeStrategy) Fields(obj runtime.Object) fields.Set {
	n := obj.(*corev1.Node)
	unsched := "false"
	if n.Spec.Unschedulable {
		unsched = "true"
	}
	return fields.Set{"metadata.name": n.Name, "spec.unschedulable": unsched}
}

func (nodeStrategy) CopyStatus(dst, src runtime.Object) {
	dst.(*corev1.Node).Status = src.(*corev1.Node).Status
}

func (nodeStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	return validateMetaUpdate(obj, old)
}

func validateTaints(taints []corev1.Taint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range taints {
		p := path.Index(i)
		errs = append(errs, validateQualifiedName(t.Key, p.Child("key"))...)
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{
				string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
		}
	}
	return errs
}
