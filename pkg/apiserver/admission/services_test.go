package admission

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

func TestParseServiceCIDR(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"10.96.0.0/12", true}, {"10.0.0.0/24", true}, {"fd00::/108", true},
		{"10.96.0.1/12", false}, {"10.0.0.0/31", false}, {"fd00::/64", false}, {"nonsense", false},
	} {
		if _, err := ParseServiceCIDR(tc.in); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.in, err)
		}
	}
	if a := FirstServiceIP(netip.MustParsePrefix("10.96.0.0/12")); a.String() != "10.96.0.1" {
		t.Errorf("first address %s", a)
	}
}

// Values are searched in the upper band first from the start given, then in the static band; the network
// and broadcast addresses are never handed out.
func TestPick(t *testing.T) {
	r := newIPRange(netip.MustParsePrefix("10.0.0.0/24")) // 254 usable, 16 static
	used := map[netip.Addr]bool{}
	for _, tc := range []struct {
		start int64
		want  string
	}{{0, "10.0.0.17"}, {5, "10.0.0.22"}, {237, "10.0.0.254"}, {238, "10.0.0.17"}} {
		if a, err := pickIP(r, tc.start, used); err != nil || a.String() != tc.want {
			t.Errorf("start %d: %v %v, want %s", tc.start, a, err, tc.want)
		}
	}
	used[netip.MustParseAddr("10.0.0.254")] = true
	if a, _ := pickIP(r, 237, used); a.String() != "10.0.0.17" {
		t.Errorf("wrap: %v", a)
	}
	for o := int64(17); o <= 254; o++ {
		used[r.addr(o)] = true
	}
	if a, _ := pickIP(r, 0, used); a.String() != "10.0.0.1" {
		t.Errorf("static band last: %v", a)
	}
	for o := int64(1); o <= 16; o++ {
		used[r.addr(o)] = true
	}
	if _, err := pickIP(r, 0, used); err == nil {
		t.Error("a full range")
	}
	if _, ok := r.offset(netip.MustParseAddr("10.0.0.255")); ok {
		t.Error("the broadcast address is usable")
	}
	if p, err := pickPort(DefaultNodePorts, 0, map[int32]bool{}); err != nil || p != 30128 {
		t.Errorf("node port %d %v", p, err)
	}
}

func service(name string, mod func(*corev1.ServiceSpec)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if mod != nil {
		mod(&s.Spec)
	}
	return s
}

type fakeServices []*corev1.Service

func (f fakeServices) Services() []*corev1.Service { return f }

// Cluster IPs and node ports are allocated as kube-apiserver's single-stack allocators do.
func TestServiceAllocation(t *testing.T) {
	existing := fakeServices{
		service("kubernetes", func(s *corev1.ServiceSpec) { s.ClusterIP = "10.96.0.1" }),
		service("np", func(s *corev1.ServiceSpec) {
			s.Type, s.ClusterIP = corev1.ServiceTypeNodePort, "10.96.1.1"
			s.Ports[0].NodePort = 30128
		}),
	}
	svcRes := &registry.Resource{Version: "v1", Name: "services", Namespaced: true}
	for _, tc := range []struct {
		name    string
		svc     *corev1.Service
		old     *corev1.Service
		wantErr string
		check   func(*testing.T, *corev1.ServiceSpec)
	}{
		{name: "a cluster IP from the upper band", svc: service("web", nil), check: func(t *testing.T, s *corev1.ServiceSpec) {
			if s.ClusterIP != "10.96.1.2" || len(s.ClusterIPs) != 1 || s.ClusterIPs[0] != s.ClusterIP ||
				*s.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack || len(s.IPFamilies) != 1 || s.IPFamilies[0] != corev1.IPv4Protocol {
				t.Errorf("spec %+v", s)
			}
		}},
		{name: "the cluster IP asked for", svc: service("web", func(s *corev1.ServiceSpec) { s.ClusterIP = "10.96.0.10" }),
			check: func(t *testing.T, s *corev1.ServiceSpec) {
				if s.ClusterIP != "10.96.0.10" || s.ClusterIPs[0] != "10.96.0.10" {
					t.Errorf("spec %+v", s)
				}
			}},
		{name: "a taken cluster IP", svc: service("web", func(s *corev1.ServiceSpec) { s.ClusterIP = "10.96.0.1" }),
			wantErr: "provided IP is already allocated"},
		{name: "a cluster IP out of range", svc: service("web", func(s *corev1.ServiceSpec) { s.ClusterIP = "10.0.0.10" }),
			wantErr: "The range of valid IPs is 10.96.0.0/12"},
		{name: "the network address", svc: service("web", func(s *corev1.ServiceSpec) { s.ClusterIP = "10.96.0.0" }),
			wantErr: "is not in the valid range"},
		{name: "headless", svc: service("web", func(s *corev1.ServiceSpec) { s.ClusterIP = corev1.ClusterIPNone }),
			check: func(t *testing.T, s *corev1.ServiceSpec) {
				if s.ClusterIPs[0] != "None" || *s.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
					t.Errorf("spec %+v", s)
				}
			}},
		{name: "headless without selector", svc: service("web", func(s *corev1.ServiceSpec) {
			s.ClusterIP, s.Selector = corev1.ClusterIPNone, nil
		}), check: func(t *testing.T, s *corev1.ServiceSpec) {
			if *s.IPFamilyPolicy != corev1.IPFamilyPolicyRequireDualStack || len(s.IPFamilies) != 2 {
				t.Errorf("spec %+v", s)
			}
		}},
		{name: "ExternalName", svc: service("web", func(s *corev1.ServiceSpec) {
			s.Type, s.ExternalName, s.Ports = corev1.ServiceTypeExternalName, "example.com", nil
		}), check: func(t *testing.T, s *corev1.ServiceSpec) {
			if s.ClusterIP != "" || s.IPFamilyPolicy != nil {
				t.Errorf("spec %+v", s)
			}
		}},
		{name: "dual-stack required", svc: service("web", func(s *corev1.ServiceSpec) {
			s.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		}), wantErr: "not configured for dual-stack"},
		{name: "IPv6 asked for", svc: service("web", func(s *corev1.ServiceSpec) { s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
			wantErr: "not configured on this cluster"},
		{name: "node ports", svc: service("web", func(s *corev1.ServiceSpec) {
			s.Type = corev1.ServiceTypeNodePort
			s.Ports = append(s.Ports, corev1.ServicePort{Name: "b", Port: 81, Protocol: corev1.ProtocolTCP, NodePort: 30129})
		}), check: func(t *testing.T, s *corev1.ServiceSpec) {
			if s.Ports[0].NodePort != 30130 || s.Ports[1].NodePort != 30129 {
				t.Errorf("ports %+v", s.Ports)
			}
		}},
		{name: "a taken node port", svc: service("web", func(s *corev1.ServiceSpec) {
			s.Type = corev1.ServiceTypeNodePort
			s.Ports[0].NodePort = 30128
		}), wantErr: "provided port is already allocated"},
		{name: "a node port out of range", svc: service("web", func(s *corev1.ServiceSpec) {
			s.Type = corev1.ServiceTypeNodePort
			s.Ports[0].NodePort = 80
		}), wantErr: "The range of valid ports is 30000-32767"},
		{name: "a load balancer without node ports", svc: service("web", func(s *corev1.ServiceSpec) {
			s.Type, s.AllocateLoadBalancerNodePorts = corev1.ServiceTypeLoadBalancer, ptr.To(false)
		}), check: func(t *testing.T, s *corev1.ServiceSpec) {
			if s.Ports[0].NodePort != 0 {
				t.Errorf("ports %+v", s.Ports)
			}
		}},
		{name: "an update keeps its own cluster IP and node port", svc: service("np", func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeNodePort }),
			old: existing[1], check: func(t *testing.T, s *corev1.ServiceSpec) {
				if s.ClusterIP != "10.96.1.1" || s.Ports[0].NodePort != 30128 {
					t.Errorf("spec %+v", s)
				}
			}},
		{name: "an update to ClusterIP drops the node ports", svc: func() *corev1.Service {
			s := existing[1].DeepCopy()
			s.Spec.Type = corev1.ServiceTypeClusterIP
			return s
		}(), old: existing[1], check: func(t *testing.T, s *corev1.ServiceSpec) {
			if s.Ports[0].NodePort != 0 || s.ClusterIP != "10.96.1.1" {
				t.Errorf("spec %+v", s)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServices(netip.MustParsePrefix("10.96.0.0/12"), DefaultNodePorts, existing)
			s.start = func(int64) int64 { return 0 }
			a := &rest.Attributes{Resource: svcRes, Object: tc.svc, Info: &request.Info{Verb: "create"}}
			if tc.old != nil {
				a.Old = tc.old
			}
			err := s.Mutate(context.Background(), a)
			if tc.wantErr != "" {
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want Invalid %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, &tc.svc.Spec)
		})
	}
}
