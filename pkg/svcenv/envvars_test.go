package svcenv

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

// The variables upstream's kubelet gives, for the example of its own tests.
func TestFromServices(t *testing.T) {
	got := map[string]string{}
	for _, e := range FromServices([]*v1.Service{
		svc("ns", "foo-bar", "1.2.3.4", v1.ServicePort{Port: 8080, Protocol: "TCP"}),
		svc("ns", "abc-123", "5.6.7.8", v1.ServicePort{Name: "u-d-p", Port: 8081, Protocol: "UDP"}, v1.ServicePort{Name: "t-c-p", Port: 8081, Protocol: "TCP"}),
		svc("ns", "q-u-u-x", "9.8.7.6", v1.ServicePort{Port: 8082, Protocol: "TCP"}, v1.ServicePort{Name: "8083", Port: 8083, Protocol: "TCP"}),
		svc("ns", "svrc-clusterip-none", "None", v1.ServicePort{Port: 8082}),
		svc("ns", "svrc-clusterip-empty", "", v1.ServicePort{Port: 8082}),
		svc("ns", "v6", "fd00::1", v1.ServicePort{Port: 53, Protocol: "SCTP"}),
		svc("ns", "no-ports", "10.0.0.9"),
	}) {
		if _, dup := got[e.Name]; dup {
			t.Errorf("%s twice", e.Name)
		}
		got[e.Name] = e.Value
	}
	want := map[string]string{
		"FOO_BAR_SERVICE_HOST": "1.2.3.4", "FOO_BAR_SERVICE_PORT": "8080", "FOO_BAR_PORT": "tcp://1.2.3.4:8080",
		"FOO_BAR_PORT_8080_TCP": "tcp://1.2.3.4:8080", "FOO_BAR_PORT_8080_TCP_PROTO": "tcp",
		"FOO_BAR_PORT_8080_TCP_PORT": "8080", "FOO_BAR_PORT_8080_TCP_ADDR": "1.2.3.4",
		"ABC_123_SERVICE_HOST": "5.6.7.8", "ABC_123_SERVICE_PORT": "8081", "ABC_123_SERVICE_PORT_U_D_P": "8081",
		"ABC_123_SERVICE_PORT_T_C_P": "8081", "ABC_123_PORT": "udp://5.6.7.8:8081",
		"ABC_123_PORT_8081_UDP": "udp://5.6.7.8:8081", "ABC_123_PORT_8081_UDP_PROTO": "udp",
		"ABC_123_PORT_8081_UDP_PORT": "8081", "ABC_123_PORT_8081_UDP_ADDR": "5.6.7.8",
		"ABC_123_PORT_8081_TCP": "tcp://5.6.7.8:8081", "ABC_123_PORT_8081_TCP_PROTO": "tcp",
		"ABC_123_PORT_8081_TCP_PORT": "8081", "ABC_123_PORT_8081_TCP_ADDR": "5.6.7.8",
		"Q_U_U_X_SERVICE_HOST": "9.8.7.6", "Q_U_U_X_SERVICE_PORT": "8082", "Q_U_U_X_SERVICE_PORT_8083": "8083",
		"Q_U_U_X_PORT": "tcp://9.8.7.6:8082", "Q_U_U_X_PORT_8082_TCP": "tcp://9.8.7.6:8082",
		"Q_U_U_X_PORT_8082_TCP_PROTO": "tcp", "Q_U_U_X_PORT_8082_TCP_PORT": "8082", "Q_U_U_X_PORT_8082_TCP_ADDR": "9.8.7.6",
		"Q_U_U_X_PORT_8083_TCP": "tcp://9.8.7.6:8083", "Q_U_U_X_PORT_8083_TCP_PROTO": "tcp",
		"Q_U_U_X_PORT_8083_TCP_PORT": "8083", "Q_U_U_X_PORT_8083_TCP_ADDR": "9.8.7.6",
		"V6_SERVICE_HOST": "fd00::1", "V6_SERVICE_PORT": "53", "V6_PORT": "sctp://[fd00::1]:53",
		"V6_PORT_53_SCTP": "sctp://[fd00::1]:53", "V6_PORT_53_SCTP_PROTO": "sctp", "V6_PORT_53_SCTP_PORT": "53",
		"V6_PORT_53_SCTP_ADDR":  "fd00::1",
		"NO_PORTS_SERVICE_HOST": "10.0.0.9",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s=%q", k, got[k])
		}
	}
}

func TestForPod(t *testing.T) {
	services := []*v1.Service{
		svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443}),
		svc("default", "web", "10.96.0.5", v1.ServicePort{Port: 80}),
		svc("app", "web", "10.96.0.6", v1.ServicePort{Port: 80}),
		svc("app", "kubernetes", "10.96.0.7", v1.ServicePort{Port: 8443}),
		svc("other", "db", "10.96.0.8", v1.ServicePort{Port: 5432}),
	}
	for _, tt := range []struct {
		name  string
		ns    string
		links bool
		want  map[string]string // a few telling variables; "" means absent
	}{
		{"links in app", "app", true, map[string]string{"WEB_SERVICE_HOST": "10.96.0.6", "KUBERNETES_SERVICE_HOST": "10.96.0.7", "DB_SERVICE_HOST": ""}},
		{"no links in app: kubernetes of default only", "app", false, map[string]string{"WEB_SERVICE_HOST": "", "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT_HTTPS": "443"}},
		{"links in default", "default", true, map[string]string{"WEB_SERVICE_HOST": "10.96.0.5", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}},
		{"no links in default", "default", false, map[string]string{"WEB_SERVICE_HOST": "", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ForPod(services, tt.ns, tt.links)
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
