package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// The essential subset of kube-apiserver 1.35's validation of the
// resource.k8s.io/v1 kinds (pkg/apis/resource/validation), with its
// messages: names, the request unions, device classes, CEL selectors
// (compiled), opaque parameters, the claim status invariants and the slice
// node selection.

// celSelectorMaxCost is upstream's CELSelectorExpressionMaxCost.
const celSelectorMaxCost = 1000000

// validateDRADriverName checks a driver name as upstream (a CSI driver's
// rules: a DNS subdomain of at most 63 characters).
var validateDRADriverName = validateCSIDriverName

// validateDNSSubdomain reports msgs of apimachinery's DNS subdomain check
// at p; "" is required.
func validateDNSSubdomain(v string, p *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// validatePoolName requires a name of '/'-separated DNS subdomains, at
// most 253 characters.
func validatePoolName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if len(name) > resourcev1.PoolNameMaxLength {
		errs = append(errs, field.TooLong(p, "", resourcev1.PoolNameMaxLength))
	}
	for _, part := range strings.Split(name, "/") {
		errs = append(errs, validateDNSSubdomain(part, p)...)
	}
	return errs
}

// requestNames maps a claim's request names to their subrequest names
// (nil for an exactly request).
type requestNames map[string]sets.Set[string]

func gatherRequestNames(c *resourcev1.DeviceClaim) requestNames {
	out := requestNames{}
	for _, r := range c.Requests {
		if len(r.FirstAvailable) == 0 {
			out[r.Name] = nil
			continue
		}
		subs := sets.New[string]()
		for _, s := range r.FirstAvailable {
			subs.Insert(s.Name)
		}
		out[r.Name] = subs
	}
	return out
}

// has reports whether s names a request or "<request>/<subrequest>".
func (r requestNames) has(s string) bool {
	req, sub, isSub := strings.Cut(s, "/")
	subs, ok := r[req]
	if !ok || strings.Contains(sub, "/") {
		return false
	}
	return !isSub || subs.Has(sub)
}

const requestRefMsg = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"

func validateRequestRefs(refs []string, names requestNames, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, ref := range refs {
		ip := p.Index(i)
		if seen.Has(ref) {
			errs = append(errs, field.Duplicate(ip, ref))
		}
		seen.Insert(ref)
		if !names.has(ref) {
			errs = append(errs, field.Invalid(ip, ref, requestRefMsg))
		}
	}
	return errs
}

// validateDeviceClaim checks a claim's (or a template's) devices.
func validateDeviceClaim(c *resourcev1.DeviceClaim, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	rp := p.Child("requests")
	if len(c.Requests) > resourcev1.DeviceRequestsMaxSize {
		return field.ErrorList{field.TooMany(rp, len(c.Requests), resourcev1.DeviceRequestsMaxSize)}
	}
	seen := sets.New[string]()
	for i := range c.Requests {
		errs = append(errs, validateDeviceRequest(&c.Requests[i], rp.Index(i))...)
		if seen.Has(c.Requests[i].Name) {
			errs = append(errs, field.Duplicate(rp.Index(i), c.Requests[i].Name))
		}
		seen.Insert(c.Requests[i].Name)
	}
	names := gatherRequestNames(c)
	if len(c.Constraints) > resourcev1.DeviceConstraintsMaxSize {
		errs = append(errs, field.TooMany(p.Child("constraints"), len(c.Constraints), resourcev1.DeviceConstraintsMaxSize))
	} else {
		for i, con := range c.Constraints {
			ip := p.Child("constraints").Index(i)
			errs = append(errs, validateRequestRefs(con.Requests, names, ip.Child("requests"))...)
			switch {
			case con.MatchAttribute != nil:
				errs = append(errs, validateFullyQualifiedName(string(*con.MatchAttribute), ip.Child("matchAttribute"))...)
			case con.DistinctAttribute != nil:
				errs = append(errs, validateFullyQualifiedName(string(*con.DistinctAttribute), ip.Child("distinctAttribute"))...)
			default:
				errs = append(errs, field.Required(ip.Child("matchAttribute"), ""))
			}
		}
	}
	if len(c.Config) > resourcev1.DeviceConfigMaxSize {
		errs = append(errs, field.TooMany(p.Child("config"), len(c.Config), resourcev1.DeviceConfigMaxSize))
	} else {
		for i, cfg := range c.Config {
			ip := p.Child("config").Index(i)
			errs = append(errs, validateRequestRefs(cfg.Requests, names, ip.Child("requests"))...)
			errs = append(errs, validateDeviceConfiguration(&cfg.DeviceConfiguration, ip)...)
		}
	}
	return errs
}

// validateDeviceRequest requires a DNS label name and exactly one of
// exactly and firstAvailable.
func validateDeviceRequest(r *resourcev1.DeviceRequest, p *field.Path) field.ErrorList {
	errs := validateDNSLabel(r.Name, p.Child("name"))
	switch first := len(r.FirstAvailable) > 0; {
	case !first && r.Exactly == nil:
		errs = append(errs, field.Required(p, "exactly one of `exactly` or `firstAvailable` is required"))
	case first && r.Exactly != nil:
		errs = append(errs, field.Invalid(p, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
	case first:
		fp := p.Child("firstAvailable")
		if len(r.FirstAvailable) > resourcev1.FirstAvailableDeviceRequestMaxSize {
			return append(errs, field.TooMany(fp, len(r.FirstAvailable), resourcev1.FirstAvailableDeviceRequestMaxSize))
		}
		seen := sets.New[string]()
		for i, s := range r.FirstAvailable {
			ip := fp.Index(i)
			errs = append(errs, validateDNSLabel(s.Name, ip.Child("name"))...)
			if seen.Has(s.Name) {
				errs = append(errs, field.Duplicate(ip, s.Name))
			}
			seen.Insert(s.Name)
			errs = append(errs, validateExactRequest(s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count, s.Tolerations, ip)...)
		}
	default:
		e := r.Exactly
		errs = append(errs, validateExactRequest(e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count, e.Tolerations, p.Child("exactly"))...)
	}
	return errs
}

// validateExactRequest checks what an exactly request and a subrequest
// share.
func validateExactRequest(class string, selectors []resourcev1.DeviceSelector, mode resourcev1.DeviceAllocationMode, count int64,
	tolerations []resourcev1.DeviceToleration, p *field.Path) field.ErrorList {
	errs := validateDNSSubdomain(class, p.Child("deviceClassName"))
	errs = append(errs, validateSelectors(selectors, p.Child("selectors"))...)
	switch mode {
	case resourcev1.DeviceAllocationModeAll:
		if count != 0 {
			errs = append(errs, field.Invalid(p.Child("count"), count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode)))
		}
	case resourcev1.DeviceAllocationModeExactCount:
		if count <= 0 {
			errs = append(errs, field.Invalid(p.Child("count"), count, "must be greater than zero"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("allocationMode"), mode,
			[]resourcev1.DeviceAllocationMode{resourcev1.DeviceAllocationModeAll, resourcev1.DeviceAllocationModeExactCount}))
	}
	if len(tolerations) > resourcev1.DeviceTolerationsMaxLength {
		return append(errs, field.TooMany(p.Child("tolerations"), len(tolerations), resourcev1.DeviceTolerationsMaxLength))
	}
	for i, t := range tolerations {
		errs = append(errs, validateDeviceToleration(t, p.Child("tolerations").Index(i))...)
	}
	return errs
}

func validateDeviceToleration(t resourcev1.DeviceToleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
	}
	switch t.Operator {
	case resourcev1.DeviceTolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty for operator `Exists`"))
		}
	case resourcev1.DeviceTolerationOpEqual:
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
	case "":
		errs = append(errs, field.Required(p.Child("operator"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator,
			[]resourcev1.DeviceTolerationOperator{resourcev1.DeviceTolerationOpEqual, resourcev1.DeviceTolerationOpExists}))
	}
	switch t.Effect {
	case "", resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNone:
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []resourcev1.DeviceTaintEffect{
			resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNone}))
	}
	return errs
}

func validateSelectors(selectors []resourcev1.DeviceSelector, p *field.Path) field.ErrorList {
	if len(selectors) > resourcev1.DeviceSelectorsMaxSize {
		return field.ErrorList{field.TooMany(p, len(selectors), resourcev1.DeviceSelectorsMaxSize)}
	}
	var errs field.ErrorList
	for i, s := range selectors {
		ip := p.Index(i).Child("cel")
		if s.CEL == nil {
			errs = append(errs, field.Required(ip, ""))
			continue
		}
		errs = append(errs, validateCELSelector(s.CEL.Expression, ip.Child("expression"))...)
	}
	return errs
}

// validateCELSelector compiles a selector as kube-apiserver does for a new
// expression: too long, not compiling or too costly is refused.
func validateCELSelector(expr string, p *field.Path) field.ErrorList {
	if len(expr) > resourcev1.CELSelectorExpressionMaxLength {
		return field.ErrorList{field.TooLong(p, "", resourcev1.CELSelectorExpressionMaxLength)}
	}
	env := environment.NewExpressions
	res := dracel.GetCompiler(dracel.Features{}).CompileCELExpression(expr, dracel.Options{EnvType: &env})
	if res.Error != nil {
		var ce *apiservercel.Error
		if errors.As(res.Error, &ce) {
			switch ce.Type {
			case apiservercel.ErrorTypeRequired:
				return field.ErrorList{field.Required(p, ce.Detail)}
			case apiservercel.ErrorTypeInvalid:
				return field.ErrorList{field.Invalid(p, expr, ce.Detail)}
			}
		}
		return field.ErrorList{field.InternalError(p, res.Error)}
	}
	if res.MaxCost > celSelectorMaxCost {
		return field.ErrorList{field.Forbidden(p, "too complex, exceeds cost limit")}
	}
	return nil
}

// validateDeviceConfiguration requires opaque parameters: a driver and a
// JSON object of at most 10 KiB.
func validateDeviceConfiguration(c *resourcev1.DeviceConfiguration, p *field.Path) field.ErrorList {
	if c.Opaque == nil {
		return field.ErrorList{field.Required(p.Child("opaque"), "")}
	}
	op := p.Child("opaque")
	errs := validateDRADriverName(c.Opaque.Driver, op.Child("driver"))
	return append(errs, validateRawObject(c.Opaque.Parameters, op.Child("parameters"), resourcev1.OpaqueParametersMaxLength)...)
}

func validateRawObject(raw runtime.RawExtension, p *field.Path, maxLen int) field.ErrorList {
	var v any
	switch {
	case len(raw.Raw) == 0:
		return field.ErrorList{field.Required(p, "")}
	case len(raw.Raw) > maxLen:
		return field.ErrorList{field.TooLong(p, "", maxLen)}
	}
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		return field.ErrorList{field.Invalid(p, "<value omitted>", fmt.Sprintf("error parsing data as JSON: %v", err.Error()))}
	}
	if v == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	if _, ok := v.(map[string]any); !ok {
		return field.ErrorList{field.Invalid(p, "<value omitted>", "must be a valid JSON object")}
	}
	return nil
}

// validateQualifiedName checks an attribute or capacity name: a C
// identifier of at most 32 characters, optionally after a driver-name
// domain and '/'.
func validateDRAQualifiedName(name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	domain, id, qualified := strings.Cut(name, "/")
	if !qualified {
		id = domain
	} else if domain == "" {
		errs = append(errs, field.Invalid(p, "", "the domain must not be empty"))
	} else {
		errs = append(errs, validateDRADriverName(domain, p)...)
	}
	if qualified && id == "" {
		return append(errs, field.Invalid(p, "", "the name must not be empty"))
	}
	if len(id) > resourcev1.DeviceMaxIDLength {
		errs = append(errs, field.TooLong(p, "", resourcev1.DeviceMaxIDLength))
	}
	for _, msg := range validation.IsCIdentifier(id) {
		errs = append(errs, field.Invalid(p, id, msg))
	}
	return errs
}

func validateFullyQualifiedName(name string, p *field.Path) field.ErrorList {
	errs := validateDRAQualifiedName(name, p)
	if !strings.Contains(name, "/") {
		errs = append(errs, field.Invalid(p, name, "a fully qualified name must be a domain and a name separated by a slash"))
	}
	return errs
}

// validateClaimStatus checks a claim's status as upstream on a status
// update: reservedFor entries complete and unique, at most 256, only with
// an allocation and not growing while the claim is deleted; an allocation
// is only set or cleared, and a new one is checked.
func validateClaimStatus(c, old *resourcev1.ResourceClaim, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	st, ost := &c.Status, &old.Status
	rp := p.Child("reservedFor")
	if len(st.ReservedFor) > resourcev1.ResourceClaimReservedForMaxSize {
		errs = append(errs, field.TooMany(rp, len(st.ReservedFor), resourcev1.ResourceClaimReservedForMaxSize))
	} else {
		uids := sets.New[string]()
		for i, r := range st.ReservedFor {
			ip := rp.Index(i)
			for _, f := range []struct{ name, v string }{{"resource", r.Resource}, {"name", r.Name}, {"uid", string(r.UID)}} {
				if f.v == "" {
					errs = append(errs, field.Required(ip.Child(f.name), ""))
				}
			}
			if uids.Has(string(r.UID)) {
				errs = append(errs, field.Duplicate(ip, r))
			}
			uids.Insert(string(r.UID))
		}
	}
	if len(st.ReservedFor) > 0 {
		if st.Allocation == nil {
			errs = append(errs, field.Forbidden(rp, "may not be specified when `allocated` is not set"))
		} else if c.DeletionTimestamp != nil && sets.New(st.ReservedFor...).Difference(sets.New(ost.ReservedFor...)).Len() > 0 {
			errs = append(errs, field.Forbidden(rp, "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"))
		}
	}
	switch {
	case ost.Allocation != nil && st.Allocation != nil:
		errs = append(errs, apivalidation.ValidateImmutableField(st.Allocation, ost.Allocation, p.Child("allocation"))...)
	case st.Allocation != nil:
		errs = append(errs, validateAllocation(st.Allocation, gatherRequestNames(&c.Spec.Devices), p.Child("allocation"))...)
	}
	return errs
}

func validateAllocation(a *resourcev1.AllocationResult, names requestNames, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	dp := p.Child("devices")
	if len(a.Devices.Results) > resourcev1.AllocationResultsMaxSize {
		return field.ErrorList{field.TooMany(dp.Child("results"), len(a.Devices.Results), resourcev1.AllocationResultsMaxSize)}
	}
	for i, r := range a.Devices.Results {
		ip := dp.Child("results").Index(i)
		if !names.has(r.Request) {
			errs = append(errs, field.Invalid(ip.Child("request"), r.Request, requestRefMsg))
		}
		errs = append(errs, validateDRADriverName(r.Driver, ip.Child("driver"))...)
		errs = append(errs, validatePoolName(r.Pool, ip.Child("pool"))...)
		errs = append(errs, validateDNSLabel(r.Device, ip.Child("device"))...)
	}
	for i, cfg := range a.Devices.Config {
		ip := dp.Child("config").Index(i)
		switch cfg.Source {
		case resourcev1.AllocationConfigSourceClaim, resourcev1.AllocationConfigSourceClass:
		case "":
			errs = append(errs, field.Required(ip.Child("source"), ""))
		default:
			errs = append(errs, field.NotSupported(ip.Child("source"), cfg.Source, []resourcev1.AllocationConfigSource{
				resourcev1.AllocationConfigSourceClaim, resourcev1.AllocationConfigSourceClass}))
		}
		errs = append(errs, validateRequestRefs(cfg.Requests, names, ip.Child("requests"))...)
		errs = append(errs, validateDeviceConfiguration(&cfg.DeviceConfiguration, ip)...)
	}
	if a.NodeSelector != nil {
		errs = append(errs, validateNodeSelectorTerms(a.NodeSelector.NodeSelectorTerms, p.Child("nodeSelector", "nodeSelectorTerms"))...)
	}
	return errs
}
