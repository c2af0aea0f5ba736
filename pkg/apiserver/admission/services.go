package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// ServiceLister returns the stored Services, read-only.
type ServiceLister interface {
	Services() []*corev1.Service
}

// Services allocates Services' cluster IPs from the service range and their
// node ports from the node port range, as kube-apiserver's Service storage
// does (single-stack): a Service asking for none gets a free one, a Service
// asking for one gets it if it is in range and free. The Services resource
// serializes its writes, so what is stored is what is taken. It is safe for
// concurrent use.
type Services struct {
	cidr      netip.Prefix
	ips       ipRange
	nodePorts PortRange
	services  ServiceLister
	// start picks where a search for a free value begins, in [0, n).
	start func(n int64) int64
}

var _ rest.Mutator = (*Services)(nil)

// NewServices returns the allocator of cidr's addresses and nodePorts for
// the Services services lists.
func NewServices(cidr netip.Prefix, nodePorts PortRange, services ServiceLister) *Services {
	return &Services{cidr: cidr, ips: newIPRange(cidr), nodePorts: nodePorts, services: services,
		start: func(n int64) int64 { return rand.Int64N(n) }}
}

func (s *Services) family() corev1.IPFamily {
	if s.cidr.Addr().Is6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// Mutate implements rest.Mutator for creates and updates of Services.
func (s *Services) Mutate(_ context.Context, a *rest.Attributes) error {
	if a.Resource == nil || a.Resource.Group != "" || a.Resource.Name != "services" || a.Info != nil && a.Info.Subresource != "" {
		return nil
	}
	svc, ok := a.Object.(*corev1.Service)
	if !ok {
		return nil
	}
	old, _ := a.Old.(*corev1.Service)
	if old != nil {
		keepAllocated(svc, old)
	}
	errs := s.initIPFamilies(svc, old)
	if len(errs) == 0 {
		errs = s.allocate(svc)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
	}
	return nil
}

// keepAllocated carries over to an update what was allocated and what the
// new state leaves out (kubectl apply sends no cluster IP or node port), and
// drops what the new type does not use, as kube-apiserver does.
func keepAllocated(svc, old *corev1.Service) {
	s, o := &svc.Spec, &old.Spec
	if s.Type == corev1.ServiceTypeExternalName {
		if o.Type != corev1.ServiceTypeExternalName && s.ClusterIP == o.ClusterIP {
			s.ClusterIP, s.ClusterIPs, s.IPFamilies, s.IPFamilyPolicy = "", nil, nil, nil
		}
	} else if s.ClusterIP == "" && len(s.ClusterIPs) == 0 && o.ClusterIP != "" {
		s.ClusterIP, s.ClusterIPs = o.ClusterIP, append([]string(nil), o.ClusterIPs...)
		if len(s.IPFamilies) == 0 {
			s.IPFamilies = append([]corev1.IPFamily(nil), o.IPFamilies...)
		}
	}
	if !needsNodePorts(s) {
		for i := range s.Ports {
			for _, op := range o.Ports {
				if s.Ports[i].NodePort == op.NodePort && s.Ports[i].Protocol == op.Protocol {
					s.Ports[i].NodePort = 0
				}
			}
		}
		return
	}
	for i := range s.Ports {
		if s.Ports[i].NodePort != 0 {
			continue
		}
		for _, op := range o.Ports {
			if op.NodePort != 0 && op.Port == s.Ports[i].Port && op.Protocol == s.Ports[i].Protocol {
				s.Ports[i].NodePort = op.NodePort
			}
		}
	}
}

func needsNodePorts(s *corev1.ServiceSpec) bool {
	return s.Type == corev1.ServiceTypeNodePort ||
		s.Type == corev1.ServiceTypeLoadBalancer && (s.AllocateLoadBalancerNodePorts == nil || *s.AllocateLoadBalancerNodePorts)
}

// initIPFamilies sets the IP family policy and families of a single-stack
// cluster, as kube-apiserver's initIPFamilyFields, and lines clusterIP and
// clusterIPs up.
func (s *Services) initIPFamilies(svc, old *corev1.Service) field.ErrorList {
	sp, p := &svc.Spec, field.NewPath("spec")
	if sp.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	switch {
	case sp.ClusterIP == "" && len(sp.ClusterIPs) > 0:
		sp.ClusterIP = sp.ClusterIPs[0]
	case sp.ClusterIP != "" && len(sp.ClusterIPs) == 0:
		sp.ClusterIPs = []string{sp.ClusterIP}
	case sp.ClusterIP != "" && sp.ClusterIPs[0] != sp.ClusterIP:
		errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(0), sp.ClusterIPs, "must match clusterIP when both are specified"))
	}
	headlessNoSelector := sp.ClusterIP == corev1.ClusterIPNone && len(sp.Selector) == 0
	if sp.IPFamilyPolicy == nil {
		policy := corev1.IPFamilyPolicySingleStack
		switch {
		case old != nil && old.Spec.IPFamilyPolicy != nil:
			policy = *old.Spec.IPFamilyPolicy
		case headlessNoSelector:
			policy = corev1.IPFamilyPolicyRequireDualStack
		}
		sp.IPFamilyPolicy = &policy
	}
	if *sp.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack && (len(sp.ClusterIPs) > 1 || len(sp.IPFamilies) > 1) {
		errs = append(errs, field.Invalid(p.Child("ipFamilyPolicy"), *sp.IPFamilyPolicy,
			"must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
	}
	if len(errs) > 0 {
		return errs
	}
	if headlessNoSelector {
		if len(sp.IPFamilies) == 0 {
			sp.IPFamilies = []corev1.IPFamily{s.family()}
		}
		if len(sp.IPFamilies) < 2 && *sp.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
			other := corev1.IPv6Protocol
			if sp.IPFamilies[0] == corev1.IPv6Protocol {
				other = corev1.IPv4Protocol
			}
			sp.IPFamilies = append(sp.IPFamilies, other)
		}
		return nil
	}
	if *sp.IPFamilyPolicy == corev1.IPFamilyPolicyRequireDualStack {
		errs = append(errs, field.Invalid(p.Child("ipFamilyPolicy"), *sp.IPFamilyPolicy, "this cluster is not configured for dual-stack services"))
	}
	if len(sp.ClusterIPs) > 1 {
		errs = append(errs, field.Invalid(p.Child("clusterIPs"), sp.ClusterIPs, "this cluster is not configured for dual-stack services"))
	}
	for i, f := range sp.IPFamilies {
		if f != s.family() {
			errs = append(errs, field.Invalid(p.Child("ipFamilies").Index(i), f, "not configured on this cluster"))
		}
	}
	if len(sp.IPFamilies) == 0 {
		sp.IPFamilies = []corev1.IPFamily{s.family()}
	}
	return errs
}

// allocate gives svc its cluster IP and node ports, or says why it cannot.
func (s *Services) allocate(svc *corev1.Service) field.ErrorList {
	usedIPs, usedPorts := map[netip.Addr]bool{}, map[int32]bool{}
	for _, o := range s.services.Services() {
		if o.Namespace == svc.Namespace && o.Name == svc.Name {
			continue // its own, on update
		}
		if a, err := netip.ParseAddr(o.Spec.ClusterIP); err == nil {
			usedIPs[a] = true
		}
		for _, p := range o.Spec.Ports {
			if p.NodePort != 0 {
				usedPorts[p.NodePort] = true
			}
		}
	}
	sp, p := &svc.Spec, field.NewPath("spec")
	var errs field.ErrorList
	switch {
	case sp.Type == corev1.ServiceTypeExternalName, sp.ClusterIP == corev1.ClusterIPNone:
	case sp.ClusterIP == "":
		ip, err := pickIP(s.ips, s.start(s.ips.size), usedIPs)
		if err != nil {
			errs = append(errs, field.InternalError(p.Child("clusterIPs"), fmt.Errorf("failed to allocate a serviceIP: %w", err)))
			break
		}
		sp.ClusterIP, sp.ClusterIPs = ip.String(), []string{ip.String()}
	default:
		ip, err := netip.ParseAddr(sp.ClusterIP)
		switch {
		case err != nil:
			// validation says why
		case !s.ips.contains(ip):
			errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(0), sp.ClusterIPs, fmt.Sprintf(
				"failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s",
				sp.ClusterIP, sp.ClusterIP, s.cidr)))
		case usedIPs[ip]:
			errs = append(errs, field.Invalid(p.Child("clusterIPs").Index(0), sp.ClusterIPs, fmt.Sprintf(
				"failed to allocate IP %s: provided IP is already allocated", sp.ClusterIP)))
		}
	}
	if !needsNodePorts(sp) {
		return errs
	}
	taken := map[int32]bool{} // by other Services, or asked for by this one
	for k := range usedPorts {
		taken[k] = true
	}
	for _, port := range sp.Ports {
		taken[port.NodePort] = true
	}
	for i := range sp.Ports {
		np := sp.Ports[i].NodePort
		pp := p.Child("ports").Index(i).Child("nodePort")
		switch {
		case np == 0:
			port, err := pickPort(s.nodePorts, s.start(int64(s.nodePorts.Max-s.nodePorts.Base)+1), taken)
			if err != nil {
				errs = append(errs, field.InternalError(pp, fmt.Errorf("failed to allocate a nodePort: %w", err)))
				continue
			}
			sp.Ports[i].NodePort = port
			taken[port] = true
		case !s.nodePorts.Contains(np):
			errs = append(errs, field.Invalid(pp, np, fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", s.nodePorts)))
		case usedPorts[np]:
			errs = append(errs, field.Invalid(pp, np, "provided port is already allocated"))
		}
	}
	return errs
}

// contains reports whether a is one of the range's usable addresses.
func (r ipRange) contains(a netip.Addr) bool {
	_, ok := r.offset(a)
	return ok
}
