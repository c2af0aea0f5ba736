package podspec

import (
	"fmt"
	"net"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func testPod(mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

var testNode = NodeFacts{
	NodeName:      "node1",
	ClusterDomain: "cluster.local",
	ClusterDNS:    []net.IP{net.ParseIP("10.96.0.10")},
	ResolvConf:    HostDNS{Servers: []string{"10.0.0.2"}, Searches: []string{"corp.example"}},
	SeccompRoot:   "/var/lib/kubelet/seccomp",
}

// The sandbox config carries the pod's identity, log directory and cgroup parent as given, and the
// annotations and labels of the pod (labels with the pod's name, namespace and UID added).
func TestSandboxConfigIdentity(t *testing.T) {
	pod := testPod(func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Annotations = map[string]string{"a": "b"}
	})
	cfg, warnings := SandboxConfig(pod, 2, "/kubepods/podu1", "/var/log/pods/ns_web_u1", testNode, nil)
	if len(warnings) != 0 {
		t.Errorf("warnings %v", warnings)
	}
	if m := cfg.Metadata; m.Name != "web" || m.Namespace != "ns" || m.Uid != "u1" || m.Attempt != 2 {
		t.Errorf("metadata %v", m)
	}
	if cfg.LogDirectory != "/var/log/pods/ns_web_u1" || cfg.Linux.CgroupParent != "/kubepods/podu1" {
		t.Errorf("log directory %q, cgroup parent %q", cfg.LogDirectory, cfg.Linux.CgroupParent)
	}
	wantLabels := map[string]string{"app": "web", "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "ns", "io.kubernetes.pod.uid": "u1"}
	if !reflect.DeepEqual(cfg.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", cfg.Labels, wantLabels)
	}
	if !reflect.DeepEqual(cfg.Annotations, map[string]string{"a": "b"}) {
		t.Errorf("annotations %v", cfg.Annotations)
	}
	pod.Annotations["a"] = "changed"
	if cfg.Annotations["a"] != "b" {
		t.Error("the sandbox's annotations share the pod's map")
	}
	if cfg.DnsConfig == nil || fmt.Sprint(cfg.DnsConfig.Servers) != "[10.96.0.10]" {
		t.Errorf("dns %v, want the cluster's", cfg.DnsConfig)
	}
}

func TestSandboxConfigHostname(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{
		{name: "pod name", want: "web"},
		{name: "spec hostname", mutate: func(p *v1.Pod) { p.Spec.Hostname = "db" }, want: "db"},
		{name: "subdomain alone keeps the short name", mutate: func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "db", "sub" }, want: "db"},
		{name: "FQDN under the cluster domain", mutate: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "db", "sub", ptr(true)
		}, want: "db.sub.ns.svc.cluster.local"},
		{name: "host network: the node's", mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true }, want: ""},
		{name: "invalid hostname falls back to the name", mutate: func(p *v1.Pod) { p.Spec.Hostname = "No_Label" }, want: "web"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := SandboxConfig(testPod(tt.mutate), 0, "", "", testNode, nil)
			if cfg.Hostname != tt.want {
				t.Errorf("hostname %q, want %q", cfg.Hostname, tt.want)
			}
		})
	}
}

func TestPortMappings(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ports [][]v1.ContainerPort
		want  []*runtimeapi.PortMapping
	}{
		{name: "no host port, no mapping", ports: [][]v1.ContainerPort{{{ContainerPort: 80}}}},
		{name: "host port, TCP by default", ports: [][]v1.ContainerPort{{{ContainerPort: 80, HostPort: 8080, HostIP: "127.0.0.1"}}},
			want: []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 8080, HostIp: "127.0.0.1"}}},
		{name: "protocols, across containers", ports: [][]v1.ContainerPort{
			{{ContainerPort: 53, HostPort: 53, Protocol: v1.ProtocolUDP}}, {{ContainerPort: 9, HostPort: 9, Protocol: v1.ProtocolSCTP}}},
			want: []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 53},
				{Protocol: runtimeapi.Protocol_SCTP, ContainerPort: 9, HostPort: 9}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(func(p *v1.Pod) {
				p.Spec.Containers = nil
				for i, ports := range tt.ports {
					p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprint("c", i), Ports: ports})
				}
			})
			if got := PortMappings(pod); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PortMappings = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNamespaceOptions(t *testing.T) {
	const pod, ctr, node = runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_NODE
	for _, tt := range []struct {
		name          string
		spec          v1.PodSpec
		net, pid, ipc runtimeapi.NamespaceMode
	}{
		{name: "defaults", net: pod, pid: ctr, ipc: pod},
		{name: "hostNetwork", spec: v1.PodSpec{HostNetwork: true}, net: node, pid: ctr, ipc: pod},
		{name: "hostIPC", spec: v1.PodSpec{HostIPC: true}, net: pod, pid: ctr, ipc: node},
		{name: "hostPID", spec: v1.PodSpec{HostPID: true}, net: pod, pid: node, ipc: pod},
		{name: "shareProcessNamespace", spec: v1.PodSpec{ShareProcessNamespace: ptr(true)}, net: pod, pid: pod, ipc: pod},
		{name: "hostPID wins over sharing", spec: v1.PodSpec{HostPID: true, ShareProcessNamespace: ptr(true)}, net: pod, pid: node, ipc: pod},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := NamespaceOptions(&v1.Pod{Spec: tt.spec}, nil)
			if o.Network != tt.net || o.Pid != tt.pid || o.Ipc != tt.ipc {
				t.Errorf("network %v pid %v ipc %v, want %v %v %v", o.Network, o.Pid, o.Ipc, tt.net, tt.pid, tt.ipc)
			}
		})
	}
}

func TestSysctls(t *testing.T) {
	for _, tt := range []struct {
		name string
		psc  *v1.PodSecurityContext
		want map[string]string
	}{
		{name: "no security context"},
		{name: "none set", psc: &v1.PodSecurityContext{}},
		{name: "set", psc: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}, {Name: "kernel.shm_rmid_forced", Value: "1"}}},
			want: map[string]string{"net.core.somaxconn": "1024", "kernel.shm_rmid_forced": "1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := SandboxConfig(testPod(func(p *v1.Pod) { p.Spec.SecurityContext = tt.psc }), 0, "", "", testNode, nil)
			if !reflect.DeepEqual(cfg.Linux.Sysctls, tt.want) {
				t.Errorf("sysctls %v, want %v", cfg.Linux.Sysctls, tt.want)
			}
		})
	}
}

func TestSandboxSecurityContext(t *testing.T) {
	for _, tt := range []struct {
		name       string
		mutate     func(*v1.Pod)
		privileged bool
		user       *runtimeapi.Int64Value
		group      *runtimeapi.Int64Value
		groups     []int64
	}{
		{name: "nothing set"},
		{name: "a privileged init container makes the sandbox privileged", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", SecurityContext: &v1.SecurityContext{Privileged: ptr(true)}}}
		}, privileged: true},
		{name: "an unprivileged container does not", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr(false)}
		}},
		{name: "the pod's user, group, supplemental groups and fsGroup", mutate: func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(2000)),
				SupplementalGroups: []int64{3000}, FSGroup: ptr(int64(4000))}
		}, user: &runtimeapi.Int64Value{Value: 1000}, group: &runtimeapi.Int64Value{Value: 2000}, groups: []int64{3000, 4000}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc := SandboxSecurityContext(testPod(tt.mutate), nil)
			if sc.Privileged != tt.privileged || !reflect.DeepEqual(sc.RunAsUser, tt.user) || !reflect.DeepEqual(sc.RunAsGroup, tt.group) ||
				!reflect.DeepEqual(sc.SupplementalGroups, tt.groups) {
				t.Errorf("got privileged %v user %v group %v groups %v", sc.Privileged, sc.RunAsUser, sc.RunAsGroup, sc.SupplementalGroups)
			}
			if sc.NamespaceOptions == nil {
				t.Error("no namespace options")
			}
		})
	}
}

// A pod in a user namespace: the sandbox and its containers carry the same mappings, with the other
// namespaces as they would be; a pod on the host's users carries none.
func TestUserNamespaceOptions(t *testing.T) {
	ids := []*runtimeapi.IDMapping{{HostId: 65536, ContainerId: 0, Length: 65536}}
	userns := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: ids}
	pod := testPod(func(p *v1.Pod) { p.Spec.HostUsers = ptr(false); p.Spec.ShareProcessNamespace = ptr(true) })
	cfg, _ := SandboxConfig(pod, 0, "", "", testNode, userns)
	sc, err := ContainerSecurityContext(pod, &pod.Spec.Containers[0], testNode.SeccompRoot, userns)
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]*runtimeapi.NamespaceOption{
		"sandbox": cfg.GetLinux().GetSecurityContext().GetNamespaceOptions(), "container": sc.GetNamespaceOptions(),
	} {
		if o.GetUsernsOptions() != userns || o.GetPid() != runtimeapi.NamespaceMode_POD || o.GetNetwork() != runtimeapi.NamespaceMode_POD {
			t.Errorf("%s: %v", name, o)
		}
	}
	plain, _ := SandboxConfig(testPod(nil), 0, "", "", testNode, nil)
	if u := plain.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(); u != nil {
		t.Errorf("a pod on the host's users got %v", u)
	}
}
