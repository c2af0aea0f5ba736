package registry

import (
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// serviceStrategy is kube-apiserver's for Services, but for the allocation
// of cluster IPs and node ports, which admission does (it needs the other
// Services): defaults, validation, an immutable cluster IP.
type serviceStrategy struct{}

// DefaultServiceClientIPTimeout is the session affinity timeout a ClientIP
// Service gets by default: three hours.
const DefaultServiceClientIPTimeout = 10800

// DefaultService applies kube-apiserver's defaults to a Service's spec.
func DefaultService(svc *corev1.Service) {
	s := &svc.Spec
	if s.SessionAffinity == "" {
		s.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.SessionAffinity == corev1.ServiceAffinityNone {
		s.SessionAffinityConfig = nil
	}
	if s.SessionAffinity == corev1.ServiceAffinityClientIP &&
		(s.SessionAffinityConfig == nil || s.SessionAffinityConfig.ClientIP == nil || s.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil) {
		s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{
			TimeoutSeconds: ptr.To[int32](DefaultServiceClientIPTimeout)}}
	}
	if s.Type == "" {
		s.Type = corev1.ServiceTypeClusterIP
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal == 0 || p.TargetPort.Type == intstr.String && p.TargetPort.StrVal == "" {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if (s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer) && s.ExternalTrafficPolicy == "" {
		s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if s.InternalTrafficPolicy == nil && s.Type != corev1.ServiceTypeExternalName {
		p := corev1.ServiceInternalTrafficPolicyCluster
		s.InternalTrafficPolicy = &p
	}
	if s.Type == corev1.ServiceTypeLoadBalancer && s.AllocateLoadBalancerNodePorts == nil {
		s.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
}

func (serviceStrategy) PrepareForCreate(obj runtime.Object) {
	svc := obj.(*corev1.Service)
	svc.Status = corev1.ServiceStatus{}
	DefaultService(svc)
}

func (serviceStrategy) PrepareForUpdate(obj, old runtime.Object) {
	svc := obj.(*corev1.Service)
	svc.Status = old.(*corev1.Service).Status
	DefaultService(svc)
}

func (serviceStrategy) Validate(obj runtime.Object) field.ErrorList {
	svc := obj.(*corev1.Service)
	errs := validateMeta(obj, true, apivalidation.NameIsDNS1035Label)
	return append(errs, validateServiceSpec(&svc.Spec, field.NewPath("spec"))...)
}

func (serviceStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	svc, o := obj.(*corev1.Service), old.(*corev1.Service)
	errs := append(validateMetaUpdate(obj, old), validateServiceSpec(&svc.Spec, field.NewPath("spec"))...)
	ext := corev1.ServiceTypeExternalName
	if svc.Spec.Type != ext && o.Spec.Type != ext && o.Spec.ClusterIP != "" && svc.Spec.ClusterIP != o.Spec.ClusterIP {
		errs = append(errs, field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), svc.Spec.ClusterIP,
			"may not change once set"))
	}
	return errs
}

func (serviceStrategy) Fields(obj runtime.Object) fields.Set {
	svc := obj.(*corev1.Service)
	f := metaFields(obj)
	f["spec.clusterIP"] = svc.Spec.ClusterIP
	f["spec.type"] = string(svc.Spec.Type)
	return f
}

func (serviceStrategy) CopyStatus(dst, src runtime.Object) {
	dst.(*corev1.Service).Status = src.(*corev1.Service).Status
}

func (serviceStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	return validateMetaUpdate(obj, old)
}

var serviceTypes = []string{string(corev1.ServiceTypeClusterIP), string(corev1.ServiceTypeNodePort),
	string(corev1.ServiceTypeLoadBalancer), string(corev1.ServiceTypeExternalName)}

// validateServiceSpec applies kube-apiserver's rules to a defaulted,
// allocated spec (single-stack: one cluster IP).
func validateServiceSpec(s *corev1.ServiceSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	headless := s.ClusterIP == corev1.ClusterIPNone
	switch s.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		switch {
		case s.ClusterIP == "":
			errs = append(errs, field.Required(p.Child("clusterIP"), ""))
		case !headless:
			if _, err := netip.ParseAddr(s.ClusterIP); err != nil {
				errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(0), s.ClusterIP,
					"must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff) or 'None'"))
			}
		}
		if len(s.ClusterIPs) > 0 && s.ClusterIPs[0] != s.ClusterIP {
			errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(0), s.ClusterIPs, "must match clusterIP when both are specified"))
		}
		if headless && s.Type != corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(0), s.ClusterIP,
				"may not be set to 'None' for LoadBalancer services"))
		}
		if len(s.Ports) == 0 && !headless {
			errs = append(errs, field.Required(p.Child("ports"), ""))
		}
	case corev1.ServiceTypeExternalName:
		if s.ClusterIP != "" || len(s.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(p.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		name := s.ExternalName
		if len(name) > 0 && name[len(name)-1] == '.' {
			name = name[:len(name)-1]
		}
		if name == "" {
			errs = append(errs, field.Required(p.Child("externalName"), ""))
		}
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			if name != "" {
				errs = append(errs, field.Invalid(p.Child("externalName"), s.ExternalName, msg))
			}
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), s.Type, serviceTypes))
	}
	names, nodePorts := sets.New[string](), sets.New[string]()
	for i, port := range s.Ports {
		pp := p.Child("ports").Index(i)
		if len(s.Ports) > 1 || port.Name != "" {
			errs = append(errs, validateDNSLabel(port.Name, pp.Child("name"))...)
		}
		if names.Has(port.Name) {
			errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
		}
		names.Insert(port.Name)
		for _, msg := range validation.IsValidPortNum(int(port.Port)) {
			errs = append(errs, field.Invalid(pp.Child("port"), port.Port, msg))
		}
		switch port.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{"SCTP", "TCP", "UDP"}))
		}
		errs = append(errs, validateTargetPort(port.TargetPort, pp.Child("targetPort"))...)
		if port.NodePort != 0 {
			if s.Type == corev1.ServiceTypeClusterIP || s.Type == corev1.ServiceTypeExternalName {
				errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is '"+string(s.Type)+"'"))
			}
			key := string(port.Protocol) + "/" + itoa(port.NodePort)
			if nodePorts.Has(key) {
				errs = append(errs, field.Duplicate(pp.Child("nodePort"), port.NodePort))
			}
			nodePorts.Insert(key)
		}
	}
	switch s.SessionAffinity {
	case corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP:
	default:
		errs = append(errs, field.NotSupported(p.Child("sessionAffinity"), s.SessionAffinity, []string{"ClientIP", "None"}))
	}
	for k, v := range s.Selector {
		errs = append(errs, validateQualifiedName(k, p.Child("selector"))...)
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Child("selector"), v, msg))
		}
	}
	return errs
}

func validateTargetPort(tp intstr.IntOrString, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if tp.Type == intstr.String {
		for _, msg := range validation.IsValidPortName(tp.StrVal) {
			errs = append(errs, field.Invalid(p, tp.StrVal, msg))
		}
		return errs
	}
	for _, msg := range validation.IsValidPortNum(int(tp.IntVal)) {
		errs = append(errs, field.Invalid(p, tp.IntVal, msg))
	}
	return errs
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
