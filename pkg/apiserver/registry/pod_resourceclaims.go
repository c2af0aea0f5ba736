package registry

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A pod's Dynamic Resource Allocation fields, checked as kube-apiserver 1.35
// does: spec.resourceClaims, the containers' resources.claims that refer to
// them, and status.resourceClaimStatuses (written by the claim controller).

// validatePodResourceClaims checks spec.resourceClaims: unique DNS label
// names, each with exactly one of resourceClaimName and
// resourceClaimTemplateName (DNS subdomains); none in a mirror pod. It
// returns the names for the containers' references.
func validatePodResourceClaims(pod *corev1.Pod, p *field.Path) (sets.Set[string], field.ErrorList) {
	names := sets.New[string]()
	var errs field.ErrorList
	for i, c := range pod.Spec.ResourceClaims {
		if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			return names, field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support resource claims")}
		}
		ip := p.Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(ip.Child("name"), ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(ip.Child("name"), c.Name))
		default:
			errs = append(errs, validateDNSLabel(c.Name, ip.Child("name"))...)
			names.Insert(c.Name)
		}
		switch {
		case c.ResourceClaimName != nil && c.ResourceClaimTemplateName != nil:
			errs = append(errs, field.Invalid(ip, c, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
		case c.ResourceClaimName == nil && c.ResourceClaimTemplateName == nil:
			errs = append(errs, field.Invalid(ip, c, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		}
		if n := c.ResourceClaimName; n != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*n, false) {
				errs = append(errs, field.Invalid(ip.Child("resourceClaimName"), *n, msg))
			}
		}
		if n := c.ResourceClaimTemplateName; n != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*n, false) {
				errs = append(errs, field.Invalid(ip.Child("resourceClaimTemplateName"), *n, msg))
			}
		}
	}
	return names, errs
}

// validatePodClaimRefs checks every container's resources.claims against
// the pod's claims, as upstream's validateResourceClaimNames: each names one
// of them, at most once (a whole claim, or distinct requests of it).
func validatePodClaimRefs(s *corev1.PodSpec, podClaims sets.Set[string], p *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(claims []corev1.ResourceClaim, cp *field.Path) {
		seen := sets.New[string]()
		for i, c := range claims {
			ip := cp.Index(i)
			if c.Name == "" {
				errs = append(errs, field.Required(ip, ""))
				continue
			}
			if seen.Has(c.Name) {
				errs = append(errs, field.Duplicate(ip, c.Name))
			} else {
				key := c.Name
				if c.Request != "" {
					errs = append(errs, validateDNSLabel(c.Request, ip.Child("request"))...)
					key += "/" + c.Request
				}
				if seen.Has(key) {
					errs = append(errs, field.Duplicate(ip, key))
				} else if c.Request == "" {
					for k := range seen {
						if claim, _, ok := strings.Cut(k, "/"); ok && claim == c.Name {
							errs = append(errs, field.Duplicate(ip, c.Name))
						}
					}
				}
				seen.Insert(key)
			}
			if !podClaims.Has(c.Name) {
				e := field.NotFound(ip, c.Name)
				e.Detail = "must be one of the names in pod.spec.resourceClaims"
				if podClaims.Len() == 0 {
					e.Detail += " which is empty"
				} else {
					e.Detail += ": " + strings.Join(sets.List(podClaims), ", ")
				}
				errs = append(errs, e)
			}
		}
	}
	for i := range s.InitContainers {
		check(s.InitContainers[i].Resources.Claims, p.Child("initContainers").Index(i).Child("resources", "claims"))
	}
	for i := range s.Containers {
		check(s.Containers[i].Resources.Claims, p.Child("containers").Index(i).Child("resources", "claims"))
	}
	return errs
}

// validatePodClaims is the whole check of a pod's spec.resourceClaims and
// the containers' references to them.
func validatePodClaims(pod *corev1.Pod, p *field.Path) field.ErrorList {
	names, errs := validatePodResourceClaims(pod, p.Child("resourceClaims"))
	return append(errs, validatePodClaimRefs(&pod.Spec, names, p)...)
}

// validatePodResourceClaimStatuses checks status.resourceClaimStatuses as
// upstream: each names an entry of spec.resourceClaims, once, and a
// generated claim's name is a DNS subdomain.
func validatePodResourceClaimStatuses(pod *corev1.Pod, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	podClaims := sets.New[string]()
	for _, c := range pod.Spec.ResourceClaims {
		podClaims.Insert(c.Name)
	}
	seen := sets.New[string]()
	for i, st := range pod.Status.ResourceClaimStatuses {
		ip := p.Index(i)
		if !podClaims.Has(st.Name) {
			errs = append(errs, field.Invalid(ip.Child("name"), st.Name, "must match the name of an entry in `spec.resourceClaims`"))
		}
		if seen.Has(st.Name) {
			errs = append(errs, field.Duplicate(ip.Child("name"), st.Name))
		}
		seen.Insert(st.Name)
		if n := st.ResourceClaimName; n != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*n, false) {
				errs = append(errs, field.Invalid(ip.Child("name"), *n, msg))
			}
		}
	}
	return errs
}
