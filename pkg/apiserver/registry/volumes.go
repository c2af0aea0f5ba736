package registry

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// persistentVolumeStrategy is kube-apiserver's for PersistentVolumes: a new
// volume is Pending (the binding loop makes it Available), its reclaim policy
// Retain and its volume mode Filesystem unless given; its source and volume
// mode never change.
type persistentVolumeStrategy struct{}

// DefaultPersistentVolume applies kube-apiserver's defaults to a volume's
// spec.
func DefaultPersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		pv.Spec.VolumeMode = &m
	}
	if hp := pv.Spec.HostPath; hp != nil && hp.Type == nil {
		t := corev1.HostPathUnset
		hp.Type = &t
	}
}

func (persistentVolumeStrategy) PrepareForCreate(obj runtime.Object) {
	pv := obj.(*corev1.PersistentVolume)
	DefaultPersistentVolume(pv)
	created := pv.CreationTimestamp
	pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &created}
}

func (persistentVolumeStrategy) PrepareForUpdate(obj, old runtime.Object) {
	pv := obj.(*corev1.PersistentVolume)
	pv.Status = old.(*corev1.PersistentVolume).Status
	DefaultPersistentVolume(pv)
}

func (persistentVolumeStrategy) Validate(obj runtime.Object) field.ErrorList {
	pv := obj.(*corev1.PersistentVolume)
	errs := validateMeta(obj, false, apivalidation.NameIsDNSSubdomain)
	return append(errs, validatePersistentVolumeSpec(&pv.Spec, field.NewPath("spec"))...)
}

func (s persistentVolumeStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	pv, o := obj.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume)
	errs := append(validateMetaUpdate(obj, old), validatePersistentVolumeSpec(&pv.Spec, field.NewPath("spec"))...)
	if !equality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, o.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "persistentvolumesource"), "spec.persistentvolumesource is immutable after creation"))
	}
	if !equality.Semantic.DeepEqual(pv.Spec.VolumeMode, o.Spec.VolumeMode) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "volumeMode"), pv.Spec.VolumeMode, "field is immutable"))
	}
	return errs
}

func (persistentVolumeStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }

func (persistentVolumeStrategy) CopyStatus(dst, src runtime.Object) {
	dst.(*corev1.PersistentVolume).Status = src.(*corev1.PersistentVolume).Status
}

func (persistentVolumeStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	errs := validateMetaUpdate(obj, old)
	switch p := obj.(*corev1.PersistentVolume).Status.Phase; p {
	case "", corev1.VolumePending, corev1.VolumeAvailable, corev1.VolumeBound, corev1.VolumeReleased, corev1.VolumeFailed:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("status", "phase"), p,
			[]string{"Pending", "Available", "Bound", "Released", "Failed"}))
	}
	return errs
}

var accessModes = []string{string(corev1.ReadWriteOnce), string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany),
	string(corev1.ReadWriteOncePod)}

// validateAccessModes requires at least one known mode, and ReadWriteOncePod alone.
func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	for _, m := range modes {
		switch m {
		case corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany:
		case corev1.ReadWriteOncePod:
			if len(modes) > 1 {
				errs = append(errs, field.Forbidden(p, "may not use ReadWriteOncePod with other access modes"))
			}
		default:
			errs = append(errs, field.NotSupported(p, m, accessModes))
		}
	}
	return errs
}

func validateVolumeMode(m *corev1.PersistentVolumeMode, p *field.Path) field.ErrorList {
	if m != nil && *m != corev1.PersistentVolumeFilesystem && *m != corev1.PersistentVolumeBlock {
		return field.ErrorList{field.NotSupported(p, *m, []string{"Block", "Filesystem"})}
	}
	return nil
}

func validateStorageClassName(name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name != "" {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(p, name, msg))
		}
	}
	return errs
}

// countPVSources counts the volume types a persistent volume source sets.
func countPVSources(s *corev1.PersistentVolumeSource) int {
	n := 0
	v := reflect.ValueOf(s).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

func validatePersistentVolumeSpec(s *corev1.PersistentVolumeSpec, p *field.Path) field.ErrorList {
	errs := validateAccessModes(s.AccessModes, p.Child("accessModes"))
	q, ok := s.Capacity[corev1.ResourceStorage]
	switch {
	case !ok:
		errs = append(errs, field.Required(p.Child("capacity").Key(string(corev1.ResourceStorage)), ""))
	case q.Sign() < 0:
		errs = append(errs, field.Invalid(p.Child("capacity").Key(string(corev1.ResourceStorage)), q.String(), "must be greater than or equal to 0"))
	}
	if len(s.Capacity) > 1 {
		errs = append(errs, field.NotSupported(p.Child("capacity"), s.Capacity, []string{string(corev1.ResourceStorage)}))
	}
	switch s.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle:
	default:
		errs = append(errs, field.NotSupported(p.Child("persistentVolumeReclaimPolicy"), s.PersistentVolumeReclaimPolicy,
			[]string{"Delete", "Recycle", "Retain"}))
	}
	switch n := countPVSources(&s.PersistentVolumeSource); {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a volume type"))
	case n > 1:
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type"))
	}
	if hp := s.HostPath; hp != nil && hp.Path == "" {
		errs = append(errs, field.Required(p.Child("hostPath", "path"), ""))
	}
	if l := s.Local; l != nil {
		if l.Path == "" {
			errs = append(errs, field.Required(p.Child("local", "path"), ""))
		}
		if s.NodeAffinity == nil || s.NodeAffinity.Required == nil {
			errs = append(errs, field.Required(p.Child("nodeAffinity"), "Local volume requires node affinity"))
		}
	}
	if c := s.CSI; c != nil {
		// As upstream's validateCSIPersistentVolumeSource: the driver is a DNS subdomain of at most 63
		// characters, and the handle is given.
		errs = append(errs, validateCSIDriverName(c.Driver, p.Child("csi", "driver"))...)
		if c.VolumeHandle == "" {
			errs = append(errs, field.Required(p.Child("csi", "volumeHandle"), ""))
		}
	}
	if a := s.NodeAffinity; a != nil && a.Required != nil && len(a.Required.NodeSelectorTerms) == 0 {
		errs = append(errs, field.Required(p.Child("nodeAffinity", "required", "nodeSelectorTerms"), "must have at least one node selector term"))
	}
	if r := s.ClaimRef; r != nil && r.Name == "" {
		errs = append(errs, field.Required(p.Child("claimRef", "name"), ""))
	}
	errs = append(errs, validateVolumeMode(s.VolumeMode, p.Child("volumeMode"))...)
	return append(errs, validateStorageClassName(s.StorageClassName, p.Child("storageClassName"))...)
}

// persistentVolumeClaimStrategy is kube-apiserver's for claims: a new claim
// is Pending with volume mode Filesystem unless given; its spec is fixed but
// for the volume it is bound to (set once) and a larger request of a bound
// claim.
type persistentVolumeClaimStrategy struct{}

func defaultClaimSpec(s *corev1.PersistentVolumeClaimSpec) {
	if s.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		s.VolumeMode = &m
	}
}

func (persistentVolumeClaimStrategy) PrepareForCreate(obj runtime.Object) {
	pvc := obj.(*corev1.PersistentVolumeClaim)
	defaultClaimSpec(&pvc.Spec)
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
}

func (persistentVolumeClaimStrategy) PrepareForUpdate(obj, old runtime.Object) {
	pvc := obj.(*corev1.PersistentVolumeClaim)
	pvc.Status = old.(*corev1.PersistentVolumeClaim).Status
	defaultClaimSpec(&pvc.Spec)
}

func (persistentVolumeClaimStrategy) Validate(obj runtime.Object) field.ErrorList {
	pvc := obj.(*corev1.PersistentVolumeClaim)
	errs := validateMeta(obj, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateClaimSpec(&pvc.Spec, field.NewPath("spec"))...)
}

func validateClaimSpec(s *corev1.PersistentVolumeClaimSpec, p *field.Path) field.ErrorList {
	errs := validateAccessModes(s.AccessModes, p.Child("accessModes"))
	rp := p.Child("resources", "requests").Key(string(corev1.ResourceStorage))
	q, ok := s.Resources.Requests[corev1.ResourceStorage]
	switch {
	case !ok:
		errs = append(errs, field.Required(rp, ""))
	case q.Cmp(resource.Quantity{}) <= 0:
		errs = append(errs, field.Invalid(rp, q.String(), "must be greater than zero"))
	}
	if s.StorageClassName != nil {
		errs = append(errs, validateStorageClassName(*s.StorageClassName, p.Child("storageClassName"))...)
	}
	return append(errs, validateVolumeMode(s.VolumeMode, p.Child("volumeMode"))...)
}

func (persistentVolumeClaimStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	pvc, o := obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim)
	errs := append(validateMetaUpdate(obj, old), validateClaimSpec(&pvc.Spec, field.NewPath("spec"))...)
	was := o.Spec.DeepCopy()
	if was.VolumeName == "" {
		was.VolumeName = pvc.Spec.VolumeName // bound once, by the binding loop
	}
	if o.Status.Phase == corev1.ClaimBound {
		newReq, oldReq := pvc.Spec.Resources.Requests[corev1.ResourceStorage], o.Spec.Resources.Requests[corev1.ResourceStorage]
		if newReq.Cmp(oldReq) < 0 {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than status.capacity"))
		}
		was.Resources.Requests = pvc.Spec.Resources.Requests
	}
	was.VolumeAttributesClassName = pvc.Spec.VolumeAttributesClassName
	if !equality.Semantic.DeepEqual(*was, pvc.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"),
			"spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"))
	}
	return errs
}

func (persistentVolumeClaimStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }

func (persistentVolumeClaimStrategy) CopyStatus(dst, src runtime.Object) {
	dst.(*corev1.PersistentVolumeClaim).Status = src.(*corev1.PersistentVolumeClaim).Status
}

func (persistentVolumeClaimStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	errs := validateMetaUpdate(obj, old)
	switch p := obj.(*corev1.PersistentVolumeClaim).Status.Phase; p {
	case "", corev1.ClaimPending, corev1.ClaimBound, corev1.ClaimLost:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("status", "phase"), p, []string{"Pending", "Bound", "Lost"}))
	}
	return errs
}
