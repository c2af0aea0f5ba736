package registry

import (
	"fmt"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// The CSI kinds a node's drivers are described by: CSIDriver (cluster-wide,
// by the driver's deployment) and CSINode (one per node, by its kubelet), as
// kube-apiserver 1.35 validates them with its default feature gates
// (SELinuxMountReadWriteOncePod, MutableCSINodeAllocatableCount and
// CSIServiceAccountTokenSecrets on).

// csiNodeIDMaxLength is the longest CSINode driver nodeID upstream accepts
// (its strategy always allows the longer of its two limits).
const csiNodeIDMaxLength = 256

// validateCSIDriverName checks a CSI driver's name as upstream's
// ValidateCSIDriverName: required, at most 63 characters, a DNS subdomain
// once lowercased.
func validateCSIDriverName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if len(name) > 63 {
		errs = append(errs, field.TooLong(p, "", 63))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// csiDriverStrategy is kube-apiserver's for CSIDrivers: unset flags get
// their defaults on every write; attachRequired and volumeLifecycleModes
// never change; a spec change bumps the generation.
type csiDriverStrategy struct{}

// DefaultCSIDriver applies kube-apiserver's defaults to a driver's spec.
func DefaultCSIDriver(d *storagev1.CSIDriver) {
	s := &d.Spec
	if s.AttachRequired == nil {
		s.AttachRequired = ptr.To(true)
	}
	if s.PodInfoOnMount == nil {
		s.PodInfoOnMount = ptr.To(false)
	}
	if s.StorageCapacity == nil {
		s.StorageCapacity = ptr.To(false)
	}
	if s.FSGroupPolicy == nil {
		s.FSGroupPolicy = ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
	}
	if len(s.VolumeLifecycleModes) == 0 {
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	if s.RequiresRepublish == nil {
		s.RequiresRepublish = ptr.To(false)
	}
	if s.SELinuxMount == nil {
		s.SELinuxMount = ptr.To(false)
	}
}

func (csiDriverStrategy) PrepareForCreate(obj runtime.Object) {
	DefaultCSIDriver(obj.(*storagev1.CSIDriver))
}

func (csiDriverStrategy) PrepareForUpdate(obj, old runtime.Object) {
	d, o := obj.(*storagev1.CSIDriver), old.(*storagev1.CSIDriver)
	DefaultCSIDriver(d)
	if !equality.Semantic.DeepEqual(d.Spec, o.Spec) {
		d.Generation = o.Generation + 1
	}
}

func (csiDriverStrategy) Validate(obj runtime.Object) field.ErrorList {
	d := obj.(*storagev1.CSIDriver)
	errs := validateMeta(obj, false, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateCSIDriverSpec(&d.Spec, field.NewPath("spec"))...)
}

func (csiDriverStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	d, o := obj.(*storagev1.CSIDriver), old.(*storagev1.CSIDriver)
	p := field.NewPath("spec")
	errs := append(validateMetaUpdate(obj, old), validateCSIDriverSpec(&d.Spec, p)...)
	// "attachedRequired" is upstream's spelling of the path in this message.
	errs = append(errs, apivalidation.ValidateImmutableField(d.Spec.AttachRequired, o.Spec.AttachRequired, p.Child("attachedRequired"))...)
	return append(errs, apivalidation.ValidateImmutableField(d.Spec.VolumeLifecycleModes, o.Spec.VolumeLifecycleModes,
		p.Child("volumeLifecycleModes"))...)
}

func (csiDriverStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }

var fsGroupPolicies = []string{string(storagev1.FileFSGroupPolicy), string(storagev1.NoneFSGroupPolicy),
	string(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)}

func validateCSIDriverSpec(s *storagev1.CSIDriverSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    *bool
	}{{"attachedRequired", s.AttachRequired}, {"podInfoOnMount", s.PodInfoOnMount},
		{"storageCapacity", s.StorageCapacity}, {"seLinuxMount", s.SELinuxMount}} {
		if f.v == nil {
			errs = append(errs, field.Required(p.Child(f.name), ""))
		}
	}
	if fp := s.FSGroupPolicy; fp != nil && !sets.New(fsGroupPolicies...).Has(string(*fp)) {
		errs = append(errs, field.NotSupported(p.Child("fsGroupPolicy"), *fp, fsGroupPolicies))
	}
	errs = append(errs, validateTokenRequests(s.TokenRequests, p.Child("tokenRequests"))...)
	for _, m := range s.VolumeLifecycleModes {
		if m != storagev1.VolumeLifecyclePersistent && m != storagev1.VolumeLifecycleEphemeral {
			errs = append(errs, field.NotSupported(p.Child("volumeLifecycleModes"), m,
				[]string{string(storagev1.VolumeLifecyclePersistent), string(storagev1.VolumeLifecycleEphemeral)}))
		}
	}
	if n := s.NodeAllocatableUpdatePeriodSeconds; n != nil && *n < 10 {
		errs = append(errs, field.Invalid(p.Child("nodeAllocatableUpdatePeriodSeconds"), *n,
			"must be greater than or equal to 10 seconds"))
	}
	if v := s.ServiceAccountTokenInSecrets; v != nil && len(s.TokenRequests) == 0 {
		errs = append(errs, field.Invalid(p.Child("serviceAccountTokenInSecrets"), *v,
			"serviceAccountTokenInSecrets is set but no tokenRequests are specified"))
	}
	return errs
}

// validateTokenRequests requires distinct audiences and expirations between
// 10 minutes and 2^32 seconds, as upstream.
func validateTokenRequests(reqs []storagev1.TokenRequest, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, r := range reqs {
		ip := p.Index(i)
		if seen.Has(r.Audience) {
			errs = append(errs, field.Duplicate(ip.Child("audience"), r.Audience))
			continue
		}
		seen.Insert(r.Audience)
		if e := r.ExpirationSeconds; e != nil {
			if *e < 600 {
				errs = append(errs, field.Invalid(ip.Child("expirationSeconds"), *e, "may not specify a duration less than 10 minutes"))
			}
			if *e > 1<<32 {
				errs = append(errs, field.Invalid(ip.Child("expirationSeconds"), *e, "may not specify a duration larger than 2^32 seconds"))
			}
		}
	}
	return errs
}

// csiNodeStrategy is kube-apiserver's for CSINodes: named after their node,
// one entry per driver with its node ID; an entry's fields but its
// allocatable count never change while the driver stays registered.
type csiNodeStrategy struct{}

func (csiNodeStrategy) PrepareForCreate(runtime.Object)      {}
func (csiNodeStrategy) PrepareForUpdate(_, _ runtime.Object) {}

func (csiNodeStrategy) Validate(obj runtime.Object) field.ErrorList {
	n := obj.(*storagev1.CSINode)
	errs := validateMeta(obj, false, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateCSINodeDrivers(n.Spec.Drivers, field.NewPath("spec", "drivers"))...)
}

func (s csiNodeStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	n, o := obj.(*storagev1.CSINode), old.(*storagev1.CSINode)
	errs := append(validateMetaUpdate(obj, old), validateCSINodeDrivers(n.Spec.Drivers, field.NewPath("spec", "drivers"))...)
	for _, od := range o.Spec.Drivers {
		for _, nd := range n.Spec.Drivers {
			if od.Name != nd.Name {
				continue
			}
			was, cur := od.DeepCopy(), nd.DeepCopy()
			was.Allocatable, cur.Allocatable = nil, nil
			errs = append(errs, apivalidation.ValidateImmutableField(cur, was, field.NewPath("spec", "drivers"))...)
		}
	}
	return errs
}

func (csiNodeStrategy) Fields(obj runtime.Object) fields.Set { return metaFields(obj) }

func validateCSINodeDrivers(drivers []storagev1.CSINodeDriver, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, d := range drivers {
		ip := p.Index(i)
		errs = append(errs, validateCSIDriverName(d.Name, ip.Child("name"))...)
		switch {
		case d.NodeID == "":
			errs = append(errs, field.Required(ip.Child("nodeID"), ""))
		case len(d.NodeID) > csiNodeIDMaxLength:
			errs = append(errs, field.Invalid(ip.Child("nodeID"), d.NodeID,
				fmt.Sprintf("must be %d characters or less", csiNodeIDMaxLength)))
		}
		if a := d.Allocatable; a != nil && a.Count != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*a.Count), ip.Child("allocatable", "count"))...)
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(ip.Child("name"), d.Name))
		}
		names.Insert(d.Name)
		keys := sets.New[string]()
		for _, k := range d.TopologyKeys {
			if k == "" {
				errs = append(errs, field.Required(ip, k))
			}
			if keys.Has(k) {
				errs = append(errs, field.Duplicate(ip, k))
			}
			keys.Insert(k)
			errs = append(errs, validateQualifiedName(k, ip)...)
		}
	}
	return errs
}
