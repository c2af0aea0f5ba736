package registry

import (
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// The storage.k8s.io kinds that describe volumes rather than drivers:
// StorageClass, VolumeAttachment and CSIStorageCapacity, as kube-apiserver
// 1.35 defaults and validates them.

// Upstream's limits on a StorageClass's parameters and an attachment's
// status.
const (
	maxParameters         = 512
	maxParametersSize     = 256 * (1 << 10)
	maxAttachMetadataSize = 256 * (1 << 10)
	maxVolumeErrorMessage = 1024
)

// storageClassStrategy is kube-apiserver's for StorageClasses: the reclaim
// policy is Delete and the binding mode Immediate unless given; provisioner,
// parameters, reclaim policy and binding mode never change.
type storageClassStrategy struct{}

// DefaultStorageClass applies kube-apiserver's defaults to a class.
func DefaultStorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
	}
	if sc.VolumeBindingMode == nil {
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
	}
}

func (storageClassStrategy) PrepareForCreate(obj runtime.Object) {
	DefaultStorageClass(obj.(*storagev1.StorageClass))
}

func (storageClassStrategy) PrepareForUpdate(obj, _ runtime.Object) {
	DefaultStorageClass(obj.(*storagev1.StorageClass))
}

func (storageClassStrategy) Validate(obj runtime.Object) field.ErrorList {
	sc := obj.(*storagev1.StorageClass)
	errs := validateMeta(obj, false, apivalidation.NameIsDNSSubdomain)
	if sc.Provisioner == "" {
		errs = append(errs, field.Required(field.NewPath("provisioner"), ""))
	} else {
		errs = append(errs, validateQualifiedName(strings.ToLower(sc.Provisioner), field.NewPath("provisioner"))...)
	}
	errs = append(errs, validateParameters(sc.Parameters, field.NewPath("parameters"))...)
	if p := sc.ReclaimPolicy; p != nil && *p != corev1.PersistentVolumeReclaimDelete && *p != corev1.PersistentVolumeReclaimRetain {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), *p, []string{"Delete", "Retain"}))
	}
	switch m := sc.VolumeBindingMode; {
	case m == nil:
		errs = append(errs, field.Required(field.NewPath("volumeBindingMode"), ""))
	case *m != storagev1.VolumeBindingImmediate && *m != storagev1.VolumeBindingWaitForFirstConsumer:
		errs = append(errs, field.NotSupported(field.NewPath("volumeBindingMode"), *m, []string{"Immediate", "WaitForFirstConsumer"}))
	}
	return append(errs, validateAllowedTopologies(sc.AllowedTopologies, field.NewPath("allowedTopologies"))...)
}

func (s storageClassStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	sc, o := obj.(*storagev1.StorageClass), old.(*storagev1.StorageClass)
	errs := append(validateMetaUpdate(obj, old), s.Validate(obj)...)
	if !reflect.DeepEqual(sc.Parameters, o.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != o.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !equality.Semantic.DeepEqual(sc.ReclaimPolicy, o.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	return append(errs, apivalidation.ValidateImmutableField(sc.VolumeBindingMode, o.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
}

func (storageClassStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }

// validateParameters holds a class's parameters to upstream's limits: at
// most 512, no empty key, 256 KiB of keys and values in all.
func validateParameters(params map[string]string, p *field.Path) field.ErrorList {
	if len(params) > maxParameters {
		return field.ErrorList{field.TooLong(p, "", maxParameters)}
	}
	var errs field.ErrorList
	size := 0
	for k, v := range params {
		if k == "" {
			errs = append(errs, field.Invalid(p, k, "field can not be empty."))
		}
		size += len(k) + len(v)
	}
	if size > maxParametersSize {
		errs = append(errs, field.TooLong(p, "", maxParametersSize))
	}
	return errs
}

// validateAllowedTopologies checks each term's label requirements (a valid
// key once per term, some values, each once) and that no two terms are the
// same, as upstream.
func validateAllowedTopologies(terms []corev1.TopologySelectorTerm, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	var seen []map[string]sets.Set[string]
	for i, term := range terms {
		ip := p.Index(i)
		exprs := map[string]sets.Set[string]{}
		for j, req := range term.MatchLabelExpressions {
			jp := ip.Child("matchLabelExpressions").Index(j)
			values := sets.New[string]()
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(jp.Child("values"), ""))
			}
			for k, v := range req.Values {
				if values.Has(v) {
					errs = append(errs, field.Duplicate(jp.Child("values").Index(k), v))
				}
				values.Insert(v)
			}
			errs = append(errs, metav1validation.ValidateLabelName(req.Key, jp.Child("key"))...)
			if _, dup := exprs[req.Key]; dup {
				errs = append(errs, field.Duplicate(jp.Child("key"), req.Key))
			}
			exprs[req.Key] = values
		}
		for _, s := range seen {
			if equality.Semantic.DeepEqual(exprs, s) {
				errs = append(errs, field.Duplicate(ip.Child("matchLabelExpressions"), ""))
			}
		}
		seen = append(seen, exprs)
	}
	return errs
}

// volumeAttachmentStrategy is kube-apiserver's for VolumeAttachments: the
// status is written through its subresource only (by the attacher) and the
// spec never changes.
type volumeAttachmentStrategy struct{}

func (volumeAttachmentStrategy) PrepareForCreate(obj runtime.Object) {
	obj.(*storagev1.VolumeAttachment).Status = storagev1.VolumeAttachmentStatus{}
}

func (volumeAttachmentStrategy) PrepareForUpdate(obj, old runtime.Object) {
	obj.(*storagev1.VolumeAttachment).Status = old.(*storagev1.VolumeAttachment).Status
}

func (volumeAttachmentStrategy) Validate(obj runtime.Object) field.ErrorList {
	va := obj.(*storagev1.VolumeAttachment)
	errs := validateMeta(obj, false, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateAttachmentSpec(&va.Spec, field.NewPath("spec"))...)
	return append(errs, validateAttachmentStatus(&va.Status, field.NewPath("status"))...)
}

func (s volumeAttachmentStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	va, o := obj.(*storagev1.VolumeAttachment), old.(*storagev1.VolumeAttachment)
	errs := append(validateMetaUpdate(obj, old), s.Validate(obj)...)
	if !equality.Semantic.DeepEqual(va.Spec, o.Spec) {
		errs = append(errs, field.Invalid(field.NewPath("spec"), va.Spec, "field is immutable"))
	}
	return errs
}

func (volumeAttachmentStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }

func (volumeAttachmentStrategy) CopyStatus(dst, src runtime.Object) {
	dst.(*storagev1.VolumeAttachment).Status = src.(*storagev1.VolumeAttachment).Status
}

func (s volumeAttachmentStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	return s.ValidateUpdate(obj, old)
}

// validateAttachmentSpec requires a valid attacher (a CSI driver name), node
// name and exactly one source, as upstream does for v1 attachments.
func validateAttachmentSpec(s *storagev1.VolumeAttachmentSpec, p *field.Path) field.ErrorList {
	errs := validateCSIDriverName(s.Attacher, p.Child("attacher"))
	src := p.Child("source")
	switch pv, inline := s.Source.PersistentVolumeName, s.Source.InlineVolumeSpec; {
	case pv == nil && inline == nil:
		errs = append(errs, field.Required(src, "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case pv != nil && inline != nil:
		errs = append(errs, field.Forbidden(src, "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case pv != nil && *pv == "":
		errs = append(errs, field.Required(src.Child("persistentVolumeName"), "must specify non empty persistentVolumeName"))
	case pv != nil:
		for _, msg := range apivalidation.NameIsDNSSubdomain(*pv, false) {
			errs = append(errs, field.Invalid(src.Child("persistentVolumeName"), *pv, msg))
		}
	default:
		errs = append(errs, validateInlineVolumeSpec(inline, src.Child("inlineVolumeSpec"))...)
	}
	for _, msg := range apivalidation.NameIsDNSSubdomain(s.NodeName, false) {
		errs = append(errs, field.Invalid(p.Child("nodeName"), s.NodeName, msg))
	}
	return errs
}

// validateInlineVolumeSpec checks the spec of a CSI volume inlined in a pod
// (migrated from an in-tree type): a CSI source alone, with access modes, no
// capacity and no claim.
func validateInlineVolumeSpec(s *corev1.PersistentVolumeSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.ClaimRef != nil {
		errs = append(errs, field.Forbidden(p.Child("claimRef"), "may not be specified in the context of inline volumes"))
	}
	if len(s.Capacity) != 0 {
		errs = append(errs, field.Forbidden(p.Child("capacity"), "may not be specified in the context of inline volumes"))
	}
	if s.CSI == nil {
		errs = append(errs, field.Required(p.Child("csi"), "has to be specified in the context of inline volumes"))
	} else {
		errs = append(errs, validateCSIDriverName(s.CSI.Driver, p.Child("csi", "driver"))...)
		if s.CSI.VolumeHandle == "" {
			errs = append(errs, field.Required(p.Child("csi", "volumeHandle"), ""))
		}
	}
	if countPVSources(&s.PersistentVolumeSource) > 1 {
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type"))
	}
	return append(errs, validateAccessModes(s.AccessModes, p.Child("accessModes"))...)
}

func validateAttachmentStatus(s *storagev1.VolumeAttachmentStatus, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for k, v := range s.AttachmentMetadata {
		size += len(k) + len(v)
	}
	if size > maxAttachMetadataSize {
		errs = append(errs, field.TooLong(p.Child("attachmentMetadata"), "", maxAttachMetadataSize))
	}
	for _, ve := range []struct {
		name string
		e    *storagev1.VolumeError
	}{{"attachError", s.AttachError}, {"detachError", s.DetachError}} {
		name, e := ve.name, ve.e
		if e == nil {
			continue
		}
		if len(e.Message) > maxVolumeErrorMessage {
			errs = append(errs, field.TooLong(p.Child(name, "message"), "", maxVolumeErrorMessage))
		}
		if e.ErrorCode != nil && *e.ErrorCode < 0 {
			errs = append(errs, field.Invalid(p.Child(name, "errorCode"), *e.ErrorCode, "must be between 0 and 2147483647, inclusive"))
		}
	}
	return errs
}

// csiStorageCapacityStrategy is kube-apiserver's for CSIStorageCapacities:
// the topology and class a capacity was reported for never change.
type csiStorageCapacityStrategy struct{}

func (csiStorageCapacityStrategy) PrepareForCreate(runtime.Object)      {}
func (csiStorageCapacityStrategy) PrepareForUpdate(_, _ runtime.Object) {}

func (csiStorageCapacityStrategy) Validate(obj runtime.Object) field.ErrorList {
	c := obj.(*storagev1.CSIStorageCapacity)
	errs := validateMeta(obj, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, metav1validation.ValidateLabelSelector(c.NodeTopology, metav1validation.LabelSelectorValidationOptions{},
		field.NewPath("nodeTopology"))...)
	for _, msg := range apivalidation.NameIsDNSSubdomain(c.StorageClassName, false) {
		errs = append(errs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, msg))
	}
	if q := c.Capacity; q != nil && q.Cmp(resource.Quantity{}) < 0 {
		errs = append(errs, field.Invalid(field.NewPath("capacity"), q.String(), "must be greater than or equal to 0"))
	}
	return errs
}

func (s csiStorageCapacityStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*storagev1.CSIStorageCapacity), old.(*storagev1.CSIStorageCapacity)
	errs := append(validateMetaUpdate(obj, old), s.Validate(obj)...)
	if !equality.Semantic.DeepEqual(c.NodeTopology, o.NodeTopology) {
		errs = append(errs, field.Invalid(field.NewPath("nodeTopology"), c.NodeTopology, "field is immutable"))
	}
	if c.StorageClassName != o.StorageClassName {
		errs = append(errs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, "field is immutable"))
	}
	return errs
}

func (csiStorageCapacityStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }
