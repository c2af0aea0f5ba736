package registry

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The resource.k8s.io/v1 kinds of Dynamic Resource Allocation, as
// kube-apiserver 1.35 defaults and keeps them with its default feature gates
// (prioritized lists and admin access on; device taints, partitionable
// devices, binding conditions, consumable capacity and extended resources
// off, so their fields are dropped from new objects).

// DefaultDeviceClaim applies upstream's v1 defaults to a claim's devices:
// an exactly request or subrequest without an allocation mode gets
// ExactCount, an ExactCount one without a count gets 1, and a toleration
// without an operator gets Equal.
func DefaultDeviceClaim(c *resourcev1.DeviceClaim) {
	def := func(mode *resourcev1.DeviceAllocationMode, count *int64, tol []resourcev1.DeviceToleration) {
		if *mode == "" {
			*mode = resourcev1.DeviceAllocationModeExactCount
		}
		if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
		defaultTolerations(tol)
	}
	for i := range c.Requests {
		r := &c.Requests[i]
		if e := r.Exactly; e != nil {
			def(&e.AllocationMode, &e.Count, e.Tolerations)
		}
		for j := range r.FirstAvailable {
			s := &r.FirstAvailable[j]
			def(&s.AllocationMode, &s.Count, s.Tolerations)
		}
	}
}

func defaultTolerations(tol []resourcev1.DeviceToleration) {
	for i := range tol {
		if tol[i].Operator == "" {
			tol[i].Operator = resourcev1.DeviceTolerationOpEqual
		}
	}
}

// DefaultResourceClaim applies upstream's v1 defaults to a claim: its
// requests' and its allocation results' tolerations.
func DefaultResourceClaim(c *resourcev1.ResourceClaim) {
	DefaultDeviceClaim(&c.Spec.Devices)
	if a := c.Status.Allocation; a != nil {
		for i := range a.Devices.Results {
			defaultTolerations(a.Devices.Results[i].Tolerations)
		}
	}
}

// dropDisabledClaimFields clears what the default-off gates guard: device
// tolerations (DRADeviceTaints) and capacity requests
// (DRAConsumableCapacity). Upstream keeps them when the old object used
// them; claim specs are immutable, so only a new spec is dropped from.
func dropDisabledClaimFields(c *resourcev1.DeviceClaim) {
	for i := range c.Requests {
		r := &c.Requests[i]
		if e := r.Exactly; e != nil {
			e.Tolerations, e.Capacity = nil, nil
		}
		for j := range r.FirstAvailable {
			r.FirstAvailable[j].Tolerations, r.FirstAvailable[j].Capacity = nil, nil
		}
	}
	for i := range c.Constraints {
		c.Constraints[i].DistinctAttribute = nil
	}
}

// deviceClassStrategy is kube-apiserver's for DeviceClasses: generation 1
// on create, bumped by a spec change; selectors compiled.
type deviceClassStrategy struct{}

func (deviceClassStrategy) PrepareForCreate(obj runtime.Object) {
	c := obj.(*resourcev1.DeviceClass)
	c.Generation = 1
	c.Spec.ExtendedResourceName = nil // DRAExtendedResource
}

func (deviceClassStrategy) PrepareForUpdate(obj, old runtime.Object) {
	c, o := obj.(*resourcev1.DeviceClass), old.(*resourcev1.DeviceClass)
	if o.Spec.ExtendedResourceName == nil {
		c.Spec.ExtendedResourceName = nil
	}
	c.Generation = o.Generation
	if !equality.Semantic.DeepEqual(c.Spec, o.Spec) {
		c.Generation = o.Generation + 1
	}
}

func (deviceClassStrategy) Validate(obj runtime.Object) field.ErrorList {
	errs := validateMeta(obj, false, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateDeviceClassSpec(&obj.(*resourcev1.DeviceClass).Spec, nil, field.NewPath("spec"))...)
}

func (deviceClassStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*resourcev1.DeviceClass), old.(*resourcev1.DeviceClass)
	return append(validateMetaUpdate(obj, old), validateDeviceClassSpec(&c.Spec, &o.Spec, field.NewPath("spec"))...)
}

func (deviceClassStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }

// validateDeviceClassSpec compiles selectors unless an update leaves them
// as they were (upstream treats those as stored expressions).
func validateDeviceClassSpec(s, old *resourcev1.DeviceClassSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if old == nil || !equality.Semantic.DeepEqual(s.Selectors, old.Selectors) {
		errs = append(errs, validateSelectors(s.Selectors, p.Child("selectors"))...)
	}
	if len(s.Config) > resourcev1.DeviceConfigMaxSize {
		return append(errs, field.TooMany(p.Child("config"), len(s.Config), resourcev1.DeviceConfigMaxSize))
	}
	for i := range s.Config {
		errs = append(errs, validateDeviceConfiguration(&s.Config[i].DeviceConfiguration, p.Child("config").Index(i))...)
	}
	return errs
}

// resourceClaimStrategy is kube-apiserver's for ResourceClaims: the status
// is written through its subresource only, the spec never changes.
type resourceClaimStrategy struct{}

func (resourceClaimStrategy) PrepareForCreate(obj runtime.Object) {
	c := obj.(*resourcev1.ResourceClaim)
	c.Status = resourcev1.ResourceClaimStatus{}
	dropDisabledClaimFields(&c.Spec.Devices)
	DefaultResourceClaim(c)
}

func (resourceClaimStrategy) PrepareForUpdate(obj, old runtime.Object) {
	c, o := obj.(*resourcev1.ResourceClaim), old.(*resourcev1.ResourceClaim)
	c.Status = o.Status
	DefaultResourceClaim(c)
}

func (resourceClaimStrategy) Validate(obj runtime.Object) field.ErrorList {
	errs := validateMeta(obj, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateDeviceClaim(&obj.(*resourcev1.ResourceClaim).Spec.Devices, field.NewPath("spec", "devices"))...)
}

func (resourceClaimStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*resourcev1.ResourceClaim), old.(*resourcev1.ResourceClaim)
	errs := validateMetaUpdate(obj, old)
	return append(errs, apivalidation.ValidateImmutableField(c.Spec, o.Spec, field.NewPath("spec"))...)
}

func (resourceClaimStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }

// CopyStatus implements StatusStrategy; the allocation's defaults are
// applied, as upstream applies them when decoding.
func (resourceClaimStrategy) CopyStatus(dst, src runtime.Object) {
	c := dst.(*resourcev1.ResourceClaim)
	c.Status = src.(*resourcev1.ResourceClaim).Status
	DefaultResourceClaim(c)
}

func (resourceClaimStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*resourcev1.ResourceClaim), old.(*resourcev1.ResourceClaim)
	return append(validateMetaUpdate(obj, old), validateClaimStatus(c, o, field.NewPath("status"))...)
}

// resourceClaimTemplateStrategy is kube-apiserver's for
// ResourceClaimTemplates: the spec never changes.
type resourceClaimTemplateStrategy struct{}

func (resourceClaimTemplateStrategy) PrepareForCreate(obj runtime.Object) {
	t := obj.(*resourcev1.ResourceClaimTemplate)
	dropDisabledClaimFields(&t.Spec.Spec.Devices)
	DefaultDeviceClaim(&t.Spec.Spec.Devices)
}

func (resourceClaimTemplateStrategy) PrepareForUpdate(obj, _ runtime.Object) {
	DefaultDeviceClaim(&obj.(*resourcev1.ResourceClaimTemplate).Spec.Spec.Devices)
}

func (resourceClaimTemplateStrategy) Validate(obj runtime.Object) field.ErrorList {
	t := obj.(*resourcev1.ResourceClaimTemplate)
	errs := validateMeta(obj, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateTemplateMeta(&t.Spec.ObjectMeta, field.NewPath("spec", "metadata"))...)
	return append(errs, validateDeviceClaim(&t.Spec.Spec.Devices, field.NewPath("spec", "spec", "devices"))...)
}

func (resourceClaimTemplateStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	t, o := obj.(*resourcev1.ResourceClaimTemplate), old.(*resourcev1.ResourceClaimTemplate)
	errs := validateMetaUpdate(obj, old)
	return append(errs, apivalidation.ValidateImmutableField(t.Spec, o.Spec, field.NewPath("spec"))...)
}

func (resourceClaimTemplateStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }

// resourceSliceStrategy is kube-apiserver's for ResourceSlices: generation
// 1 on create, bumped by a spec change; driver, pool name and node name
// never change; selectable by spec.nodeName ("" for a slice without one)
// and spec.driver.
type resourceSliceStrategy struct{}

func (resourceSliceStrategy) PrepareForCreate(obj runtime.Object) {
	s := obj.(*resourcev1.ResourceSlice)
	s.Generation = 1
	dropDisabledSliceFields(&s.Spec, nil)
}

func (resourceSliceStrategy) PrepareForUpdate(obj, old runtime.Object) {
	s, o := obj.(*resourcev1.ResourceSlice), old.(*resourcev1.ResourceSlice)
	dropDisabledSliceFields(&s.Spec, &o.Spec)
	s.Generation = o.Generation
	if !equality.Semantic.DeepEqual(s.Spec, o.Spec) {
		s.Generation = o.Generation + 1
	}
}

func (resourceSliceStrategy) Validate(obj runtime.Object) field.ErrorList {
	errs := validateMeta(obj, false, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateSliceSpec(&obj.(*resourcev1.ResourceSlice).Spec, nil, field.NewPath("spec"))...)
}

func (resourceSliceStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	s, o := obj.(*resourcev1.ResourceSlice), old.(*resourcev1.ResourceSlice)
	return append(validateMetaUpdate(obj, old), validateSliceSpec(&s.Spec, &o.Spec, field.NewPath("spec"))...)
}

// Fields implements Strategy: spec.nodeName and spec.driver besides the
// metadata, as upstream's slice field selectors.
func (resourceSliceStrategy) Fields(obj runtime.Object) fields.Set {
	s := obj.(*resourcev1.ResourceSlice)
	f := metaFields(obj)
	f[resourcev1.ResourceSliceSelectorNodeName] = ""
	if s.Spec.NodeName != nil {
		f[resourcev1.ResourceSliceSelectorNodeName] = *s.Spec.NodeName
	}
	f[resourcev1.ResourceSliceSelectorDriver] = s.Spec.Driver
	return f
}

// dropDisabledSliceFields clears the fields of the default-off gates
// (taints, partitionable devices, binding conditions, consumable capacity)
// unless the old slice used them.
func dropDisabledSliceFields(s, old *resourcev1.ResourceSliceSpec) {
	used := func(f func(*resourcev1.ResourceSliceSpec) bool) bool { return old != nil && f(old) }
	taints := used(func(s *resourcev1.ResourceSliceSpec) bool {
		return anyDevice(s, func(d *resourcev1.Device) bool { return len(d.Taints) > 0 })
	})
	partitionable := used(func(s *resourcev1.ResourceSliceSpec) bool {
		return s.SharedCounters != nil || s.PerDeviceNodeSelection != nil || anyDevice(s, func(d *resourcev1.Device) bool {
			return d.ConsumesCounters != nil || d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil
		})
	})
	binding := used(func(s *resourcev1.ResourceSliceSpec) bool {
		return anyDevice(s, func(d *resourcev1.Device) bool {
			return d.BindingConditions != nil || d.BindingFailureConditions != nil || d.BindsToNode != nil
		})
	})
	capacity := used(func(s *resourcev1.ResourceSliceSpec) bool {
		return anyDevice(s, func(d *resourcev1.Device) bool { return d.AllowMultipleAllocations != nil })
	})
	if !partitionable {
		s.SharedCounters, s.PerDeviceNodeSelection = nil, nil
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		if !taints {
			d.Taints = nil
		}
		if !partitionable {
			d.ConsumesCounters, d.NodeName, d.NodeSelector, d.AllNodes = nil, nil, nil, nil
		}
		if !binding {
			d.BindingConditions, d.BindingFailureConditions, d.BindsToNode = nil, nil, nil
		}
		if !capacity {
			d.AllowMultipleAllocations = nil
			for k, c := range d.Capacity {
				c.RequestPolicy = nil
				d.Capacity[k] = c
			}
		}
	}
}

func anyDevice(s *resourcev1.ResourceSliceSpec, f func(*resourcev1.Device) bool) bool {
	for i := range s.Devices {
		if f(&s.Devices[i]) {
			return true
		}
	}
	return false
}

// validateSliceSpec checks a slice as upstream: driver and pool, exactly
// one node selection, unique valid devices; on update, driver, pool name
// and node name are immutable.
func validateSliceSpec(s, old *resourcev1.ResourceSliceSpec, p *field.Path) field.ErrorList {
	errs := validateDRADriverName(s.Driver, p.Child("driver"))
	errs = append(errs, validatePoolName(s.Pool.Name, p.Child("pool", "name"))...)
	if s.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(p.Child("pool", "resourceSliceCount"), s.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	if s.Pool.Generation < 0 {
		errs = append(errs, field.Invalid(p.Child("pool", "generation"), s.Pool.Generation, "must be greater than or equal to zero"))
	}
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(s.Pool.Name, old.Pool.Name, p.Child("pool", "name"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(s.Driver, old.Driver, p.Child("driver"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(s.NodeName, old.NodeName, p.Child("nodeName"))...)
	}
	var set []string
	if n := s.NodeName; n != nil {
		if *n == "" {
			errs = append(errs, field.Invalid(p.Child("nodeName"), *n, "must be either unset or set to a non-empty string"))
		} else {
			set = append(set, "`nodeName`")
			for _, msg := range apivalidation.NameIsDNSSubdomain(*n, false) {
				errs = append(errs, field.Invalid(p.Child("nodeName"), *n, msg))
			}
		}
	}
	if ns := s.NodeSelector; ns != nil {
		set = append(set, "`nodeSelector`")
		errs = append(errs, validateNodeSelectorTerms(ns.NodeSelectorTerms, p.Child("nodeSelector", "nodeSelectorTerms"))...)
		if len(ns.NodeSelectorTerms) != 1 {
			errs = append(errs, field.Invalid(p.Child("nodeSelector", "nodeSelectorTerms"), ns.NodeSelectorTerms,
				"must have exactly one node selector term"))
		}
	}
	for _, f := range []struct {
		name string
		v    *bool
	}{{"allNodes", s.AllNodes}, {"perDeviceNodeSelection", s.PerDeviceNodeSelection}} {
		switch {
		case f.v == nil:
		case *f.v:
			set = append(set, "`"+f.name+"`")
		default:
			errs = append(errs, field.Invalid(p.Child(f.name), *f.v, "must be either unset or set to true"))
		}
	}
	const oneOf = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
	switch len(set) {
	case 0:
		errs = append(errs, field.Required(p, oneOf))
	case 1:
	default:
		errs = append(errs, field.Invalid(p, fmt.Sprintf("{%s}", strings.Join(set, ", ")), oneOf+", but multiple fields are set"))
	}
	return append(errs, validateDevices(s.Devices, p.Child("devices"))...)
}

func validateDevices(devices []resourcev1.Device, p *field.Path) field.ErrorList {
	if len(devices) > resourcev1.ResourceSliceMaxDevices {
		return field.ErrorList{field.TooMany(p, len(devices), resourcev1.ResourceSliceMaxDevices)}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i, d := range devices {
		ip := p.Index(i)
		errs = append(errs, validateDNSLabel(d.Name, ip.Child("name"))...)
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(ip, d.Name))
		}
		names.Insert(d.Name)
		if n := len(d.Attributes) + len(d.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			errs = append(errs, field.Invalid(ip, n, fmt.Sprintf("the total number of attributes and capacities must not exceed %d",
				resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
		}
		for k, a := range d.Attributes {
			kp := ip.Child("attributes").Key(string(k))
			errs = append(errs, validateDRAQualifiedName(string(k), kp)...)
			errs = append(errs, validateAttribute(a, kp)...)
		}
		for k := range d.Capacity {
			errs = append(errs, validateDRAQualifiedName(string(k), ip.Child("capacity").Key(string(k)))...)
		}
	}
	return errs
}

func validateAttribute(a resourcev1.DeviceAttribute, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	for _, set := range []bool{a.BoolValue != nil, a.IntValue != nil, a.StringValue != nil, a.VersionValue != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		errs = append(errs, field.Invalid(p, "", "exactly one value must be specified"))
	}
	for _, v := range []struct {
		name string
		s    *string
	}{{"string", a.StringValue}, {"version", a.VersionValue}} {
		if v.s != nil && len(*v.s) > resourcev1.DeviceAttributeMaxValueLength {
			errs = append(errs, field.TooLong(p.Child(v.name), "", resourcev1.DeviceAttributeMaxValueLength))
		}
	}
	return errs
}

// validateNodeSelectorTerms checks node selector terms as upstream's
// ValidateNodeSelector: at least one, with valid label requirements and
// metadata.name field requirements.
func validateNodeSelectorTerms(terms []corev1.NodeSelectorTerm, p *field.Path) field.ErrorList {
	if len(terms) == 0 {
		return field.ErrorList{field.Required(p, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, t := range terms {
		for j, r := range t.MatchExpressions {
			rp := p.Index(i).Child("matchExpressions").Index(j)
			errs = append(errs, metav1validation.ValidateLabelName(r.Key, rp.Child("key"))...)
			switch r.Operator {
			case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
				if len(r.Values) == 0 {
					errs = append(errs, field.Required(rp.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
				}
			case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
				if len(r.Values) > 0 {
					errs = append(errs, field.Forbidden(rp.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
				}
			case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
				if len(r.Values) != 1 {
					errs = append(errs, field.Required(rp.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
				}
			default:
				errs = append(errs, field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
			}
			for k, v := range r.Values {
				for _, msg := range validation.IsValidLabelValue(v) {
					errs = append(errs, field.Invalid(rp.Child("values").Index(k), v, msg))
				}
			}
		}
		for j, r := range t.MatchFields {
			rp := p.Index(i).Child("matchFields").Index(j)
			if r.Key != "metadata.name" {
				errs = append(errs, field.Invalid(rp.Child("key"), r.Key, "not a valid field selector key"))
			}
			switch r.Operator {
			case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
				if len(r.Values) != 1 {
					errs = append(errs, field.Required(rp.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
				}
			default:
				errs = append(errs, field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
			}
		}
	}
	return errs
}
