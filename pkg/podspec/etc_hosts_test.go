package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const hostsHead = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
	"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"

// Upstream's cases (kubelet_pods_test.go TestManagedHostsFileContent).
func TestManagedHostsContent(t *testing.T) {
	tests := []struct {
		name    string
		ips     []string
		host    string
		domain  string
		aliases []v1.HostAlias
		want    string
	}{
		{"pod IP", []string{"123.45.67.89"}, "podFoo", "", nil, hostsHead + "123.45.67.89\tpodFoo\n"},
		{"subdomain", []string{"203.0.113.1"}, "podFoo", "domainFoo", nil, hostsHead + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n"},
		{"aliases", []string{"203.0.113.1"}, "podFoo", "domainFoo",
			[]v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar", "baz"}}},
			hostsHead + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n"},
		{"two aliases", []string{"203.0.113.1"}, "podFoo", "domainFoo",
			[]v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar", "baz"}}, {IP: "456.78.90.123", Hostnames: []string{"park", "doo", "boo"}}},
			hostsHead + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"},
		{"dual stack", []string{"203.0.113.1", "fd00::6"}, "podFoo", "domainFoo", nil,
			hostsHead + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\nfd00::6\tpodFoo.domainFoo\tpodFoo\n"},
	}
	for _, tt := range tests {
		if got := string(ManagedHostsContent(tt.ips, tt.host, tt.domain, tt.aliases)); got != tt.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tt.name, got, tt.want)
		}
	}
	got := string(HostNetworkHostsContent([]byte("127.0.0.1 localhost\n"), []v1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"db"}}}))
	if want := "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n10.0.0.1\tdb\n"; got != want {
		t.Errorf("host network:\n%s\nwant:\n%s", got, want)
	}
}

func TestPodHostname(t *testing.T) {
	yes := true
	long := "a123456789b123456789c123456789d123456789e123456789f123456789g123456789"
	tests := []struct {
		name       string
		spec       v1.PodSpec
		podName    string
		host, fqdn string
		domain     string
		wantErr    bool
	}{
		{"pod name", v1.PodSpec{}, "web", "web", "web", "", false},
		{"spec hostname", v1.PodSpec{Hostname: "db"}, "web", "db", "db", "", false},
		{"subdomain", v1.PodSpec{Hostname: "db", Subdomain: "sub"}, "web", "db", "db", "sub.ns.svc.cluster.local", false},
		{"FQDN", v1.PodSpec{Hostname: "db", Subdomain: "sub", SetHostnameAsFQDN: &yes}, "web", "db", "db.sub.ns.svc.cluster.local", "sub.ns.svc.cluster.local", false},
		{"FQDN without subdomain", v1.PodSpec{SetHostnameAsFQDN: &yes}, "web", "web", "web", "", false},
		{"long name cut", v1.PodSpec{}, long + "-x", long[:63], long[:63], "", false},
		{"bad hostname", v1.PodSpec{Hostname: "Not_A_Label"}, "web", "", "web", "", true},
		{"bad subdomain", v1.PodSpec{Subdomain: "a.b"}, "web", "", "web", "", true},
		{"host network", v1.PodSpec{HostNetwork: true}, "web", "web", "", "", false},
		{"hostnameOverride over hostname and subdomain", v1.PodSpec{HostnameOverride: ptrTo("my-host.example"), Hostname: "db", Subdomain: "sub"},
			"web", "my-host.example", "my-host.example", "", false},
		{"bad hostnameOverride", v1.PodSpec{HostnameOverride: ptrTo("Not_A_Subdomain")}, "web", "", "web", "", true},
	}
	for _, tt := range tests {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.podName, Namespace: "ns"}, Spec: tt.spec}
		host, domain, err := HostnameAndDomain(pod, "cluster.local")
		if (err != nil) != tt.wantErr || !tt.wantErr && (host != tt.host || domain != tt.domain) {
			t.Errorf("%s: %q %q %v, want %q %q (error %v)", tt.name, host, domain, err, tt.host, tt.domain, tt.wantErr)
		}
		if got := Hostname(pod, "cluster.local"); got != tt.fqdn {
			t.Errorf("%s: sandbox hostname %q, want %q", tt.name, got, tt.fqdn)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
