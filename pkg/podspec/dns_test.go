package podspec

import (
	"fmt"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseResolvConf(t *testing.T) {
	h, err := ParseResolvConf(strings.NewReader("# comment\nnameserver 10.0.0.2\nsearch old.example\n" +
		"nameserver 10.0.0.3 ; trailing\nsearch corp.example. lab.example .\noptions ndots:2 edns0\ndomain ignored\nnameserver\n"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(h.Servers) != "[10.0.0.2 10.0.0.3]" || fmt.Sprint(h.Searches) != "[corp.example lab.example]" ||
		fmt.Sprint(h.Options) != "[ndots:2 edns0]" {
		t.Errorf("parsed %+v", h)
	}
}

func TestDNSConfig(t *testing.T) {
	host := HostDNS{Servers: []string{"10.0.0.2"}, Searches: []string{"corp.example"}, Options: []string{"edns0"}}
	cluster := []net.IP{net.ParseIP("10.96.0.10")}
	two := "2"
	many := func(n int, f string) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, fmt.Sprintf(f, i))
		}
		return out
	}
	for _, tt := range []struct {
		name                       string
		policy                     v1.DNSPolicy
		hostNet                    bool
		config                     *v1.PodDNSConfig
		clusterDNS                 []net.IP
		servers, searches, options string
		warning                    string
	}{
		{name: "cluster first", policy: v1.DNSClusterFirst, clusterDNS: cluster,
			servers: "[10.96.0.10]", searches: "[ns.svc.cluster.local svc.cluster.local cluster.local corp.example]", options: "[ndots:5]"},
		{name: "empty policy is cluster first", clusterDNS: cluster,
			servers: "[10.96.0.10]", searches: "[ns.svc.cluster.local svc.cluster.local cluster.local corp.example]", options: "[ndots:5]"},
		{name: "cluster first without cluster DNS falls back", policy: v1.DNSClusterFirst,
			servers: "[10.0.0.2]", searches: "[corp.example]", options: "[edns0]", warning: "MissingClusterDNS"},
		{name: "default", policy: v1.DNSDefault, clusterDNS: cluster, servers: "[10.0.0.2]", searches: "[corp.example]", options: "[edns0]"},
		{name: "host network under cluster first", policy: v1.DNSClusterFirst, hostNet: true, clusterDNS: cluster,
			servers: "[10.0.0.2]", searches: "[corp.example]", options: "[edns0]"},
		{name: "host network under ClusterFirstWithHostNet", policy: v1.DNSClusterFirstWithHostNet, hostNet: true, clusterDNS: cluster,
			servers: "[10.96.0.10]", searches: "[ns.svc.cluster.local svc.cluster.local cluster.local corp.example]", options: "[ndots:5]"},
		{name: "none", policy: v1.DNSNone, clusterDNS: cluster,
			config:  &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Options: []v1.PodDNSConfigOption{{Name: "rotate"}}},
			servers: "[1.1.1.1]", searches: "[]", options: "[rotate]"},
		{name: "merged, duplicates dropped, options by name", policy: v1.DNSClusterFirst, clusterDNS: cluster,
			config: &v1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "10.0.0.53"}, Searches: []string{"corp.example", "x.example"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}}},
			servers: "[10.96.0.10 10.0.0.53]", searches: "[ns.svc.cluster.local svc.cluster.local cluster.local corp.example x.example]",
			options: "[ndots:2 edns0]"},
		{name: "four nameservers cut to three", policy: v1.DNSNone, config: &v1.PodDNSConfig{Nameservers: many(4, "10.0.0.%d")},
			servers: "[10.0.0.0 10.0.0.1 10.0.0.2]", searches: "[]", options: "[]", warning: "DNSConfigForming"},
		{name: "33 search domains cut to 32", policy: v1.DNSNone, config: &v1.PodDNSConfig{Searches: many(33, "d%d.example")},
			servers: "[]", searches: fmt.Sprint(many(32, "d%d.example")), options: "[]", warning: "DNSConfigForming"},
		{name: "search line over 2048 characters cut", policy: v1.DNSNone,
			config:  &v1.PodDNSConfig{Searches: []string{strings.Repeat("a", 1000), strings.Repeat("b", 1000), strings.Repeat("c", 100)}},
			servers: "[]", searches: fmt.Sprint([]string{strings.Repeat("a", 1000), strings.Repeat("b", 1000)}), options: "[]", warning: "DNSConfigForming"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
				Spec: v1.PodSpec{DNSPolicy: tt.policy, HostNetwork: tt.hostNet, DNSConfig: tt.config}}
			cfg, warnings := DNSConfig(pod, tt.clusterDNS, "cluster.local", host)
			if got := fmt.Sprint(cfg.Servers); got != tt.servers {
				t.Errorf("servers %s, want %s", got, tt.servers)
			}
			if got := fmt.Sprint(cfg.Searches); got != tt.searches {
				t.Errorf("searches %s, want %s", got, tt.searches)
			}
			if got := fmt.Sprint(cfg.Options); got != tt.options {
				t.Errorf("options %s, want %s", got, tt.options)
			}
			var reasons []string
			for _, w := range warnings {
				reasons = append(reasons, w.Reason)
			}
			if strings.Join(reasons, ",") != tt.warning {
				t.Errorf("warnings %v, want %q", warnings, tt.warning)
			}
		})
	}
}
