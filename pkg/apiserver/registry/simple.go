package registry

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateMeta validates an object's metadata on create.
func validateMeta(obj runtime.Object, namespaced bool, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	return apivalidation.ValidateObjectMetaAccessor(acc, namespaced, nameFn, field.NewPath("metadata"))
}

// validateMetaUpdate validates an object's metadata on update.
func validateMetaUpdate(obj, old runtime.Object) field.ErrorList {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	oldAcc, err := meta.Accessor(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	return apivalidation.ValidateObjectMetaAccessorUpdate(acc, oldAcc, field.NewPath("metadata"))
}

// metaFields returns the selectable metadata fields of obj.
func metaFields(obj runtime.Object) fields.Set {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return fields.Set{}
	}
	return fields.Set{"metadata.name": acc.GetName(), "metadata.namespace": acc.GetNamespace()}
}

// basic is the strategy of a namespaced kind without special rules.
type basic struct {
	nameFn apivalidation.ValidateNameFunc
}

func (basic) PrepareForCreate(runtime.Object)      {}
func (basic) PrepareForUpdate(_, _ runtime.Object) {}
func (basic) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }
func (b basic) Validate(obj runtime.Object) field.ErrorList {
	return validateMeta(obj, true, b.nameFn)
}
func (basic) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return validateMetaUpdate(obj, old)
}

type configMapStrategy struct{ basic }

func (configMapStrategy) Validate(obj runtime.Object) field.ErrorList {
	errs := validateMeta(obj, true, apivalidation.NameIsDNSSubdomain)
	cm := obj.(*corev1.ConfigMap)
	errs = append(errs, validateDataKeys(cm.Data, nil, field.NewPath("data"))...)
	return append(errs, validateDataKeys(nil, cm.BinaryData, field.NewPath("binaryData"))...)
}

func (s configMapStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	errs := validateMetaUpdate(obj, old)
	if o := old.(*corev1.ConfigMap); o.Immutable != nil && *o.Immutable {
		n := obj.(*corev1.ConfigMap)
		if !equalStrings(n.Data, o.Data) || !equalBytes(n.BinaryData, o.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return errs
}

type secretStrategy struct{ basic }

func (secretStrategy) PrepareForCreate(obj runtime.Object) {
	s := obj.(*corev1.Secret)
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	for k, v := range s.StringData {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

func (s secretStrategy) PrepareForUpdate(obj, _ runtime.Object) { s.PrepareForCreate(obj) }

func (secretStrategy) Validate(obj runtime.Object) field.ErrorList {
	errs := validateMeta(obj, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateDataKeys(nil, obj.(*corev1.Secret).Data, field.NewPath("data"))...)
}

func (secretStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	errs := validateMetaUpdate(obj, old)
	n, o := obj.(*corev1.Secret), old.(*corev1.Secret)
	if n.Type != o.Type {
		errs = append(errs, field.Invalid(field.NewPath("type"), n.Type, "field is immutable"))
	}
	if o.Immutable != nil && *o.Immutable && !equalBytes(n.Data, o.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
	}
	return errs
}

func (secretStrategy) Fields(obj runtime.Object) fields.Set {
	f := metaFields(obj)
	f["type"] = string(obj.(*corev1.Secret).Type)
	return f
}

type serviceAccountStrategy struct{ basic }

func (serviceAccountStrategy) Validate(obj runtime.Object) field.ErrorList {
	return validateMeta(obj, true, apivalidation.ValidateServiceAccountName)
}

type leaseStrategy struct{ basic }

func (leaseStrategy) Validate(obj runtime.Object) field.ErrorList {
	errs := validateMeta(obj, true, apivalidation.NameIsDNSSubdomain)
	l := obj.(*coordinationv1.Lease)
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	return errs
}

func (s leaseStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return append(validateMetaUpdate(obj, old), s.Validate(obj)...)
}

func validateDataKeys(str map[string]string, bin map[string][]byte, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(k string) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(path, k, msg))
		}
	}
	for k := range str {
		check(k)
	}
	for k := range bin {
		check(k)
	}
	return errs
}

func equalStrings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func equalBytes(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || string(w) != string(v) {
			return false
		}
	}
	return true
}
