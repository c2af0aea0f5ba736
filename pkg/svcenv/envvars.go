package svcenv

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// masterServices are the Services of the default namespace every pod gets variables of, even with
// enableServiceLinks false: in-cluster clients find the API server through KUBERNETES_SERVICE_HOST.
var masterServices = map[string]bool{"kubernetes": true}

// ForPod returns the service variables of a pod in namespace ns, from all the cluster's services.
func ForPod(services []*v1.Service, ns string, enableServiceLinks bool) map[string]string {
	chosen := map[string]*v1.Service{}
	for _, s := range services {
		if !ipSet(s) {
			continue
		}
		switch {
		case s.Namespace == metav1.NamespaceDefault && masterServices[s.Name]:
			if _, ok := chosen[s.Name]; !ok {
				chosen[s.Name] = s
			}
		case s.Namespace == ns && enableServiceLinks:
			chosen[s.Name] = s
		}
	}
	out := map[string]string{}
	for _, s := range chosen {
		for _, e := range FromServices([]*v1.Service{s}) {
			out[e.Name] = e.Value
		}
	}
	return out
}

func ipSet(s *v1.Service) bool {
	return s.Spec.ClusterIP != v1.ClusterIPNone && s.Spec.ClusterIP != ""
}

// FromServices is upstream's envvars.FromServices: the variables of each service with a cluster IP. A
// service without ports gets only its host variable.
func FromServices(services []*v1.Service) []v1.EnvVar {
	var out []v1.EnvVar
	for _, s := range services {
		if !ipSet(s) {
			continue
		}
		prefix := envName(s.Name)
		out = append(out, v1.EnvVar{Name: prefix + "_SERVICE_HOST", Value: s.Spec.ClusterIP})
		if len(s.Spec.Ports) == 0 {
			continue
		}
		portVar := prefix + "_SERVICE_PORT"
		out = append(out, v1.EnvVar{Name: portVar, Value: strconv.Itoa(int(s.Spec.Ports[0].Port))})
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				out = append(out, v1.EnvVar{Name: portVar + "_" + envName(p.Name), Value: strconv.Itoa(int(p.Port))})
			}
		}
		out = append(out, linkVariables(s, prefix)...)
	}
	return out
}

// linkVariables are the Docker link variables of a service, the first port also as <NAME>_PORT.
func linkVariables(s *v1.Service, prefix string) []v1.EnvVar {
	var out []v1.EnvVar
	for i, p := range s.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(v1.ProtocolTCP)
		}
		lower := strings.ToLower(proto)
		url := fmt.Sprintf("%s://%s", lower, net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(p.Port))))
		if i == 0 {
			out = append(out, v1.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out = append(out,
			v1.EnvVar{Name: pp, Value: url},
			v1.EnvVar{Name: pp + "_PROTO", Value: lower},
			v1.EnvVar{Name: pp + "_PORT", Value: strconv.Itoa(int(p.Port))},
			v1.EnvVar{Name: pp + "_ADDR", Value: s.Spec.ClusterIP},
		)
	}
	return out
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
