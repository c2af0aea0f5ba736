package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Upstream's cases (pkg/kubelet/sysctl/allowlist_test.go TestNewAllowlist).
func TestValidateUnsafeSysctls(t *testing.T) {
	tests := []struct {
		patterns []string
		ok       bool
	}{
		{[]string{"kernel.msg*", "kernel.sem"}, true},
		{[]string{"kernel/msg*", "kernel/sem"}, true},
		{[]string{" kernel.msg*"}, false},
		{[]string{"kernel.msg* "}, false},
		{[]string{"net.-"}, false},
		{[]string{"net.*.foo"}, false},
		{[]string{"net.*/foo"}, false},
		{[]string{"foo"}, false},
		{[]string{"foo*"}, false},
	}
	for _, tt := range tests {
		if err := ValidateUnsafeSysctls(tt.patterns); (err == nil) != tt.ok {
			t.Errorf("%v: %v, want ok %v", tt.patterns, err, tt.ok)
		}
	}
}

// Upstream's cases (pkg/kubelet/sysctl/allowlist_test.go TestAllowlist), with kernel.msg*, kernel.sem and
// net.b.* allowed beyond the safe set.
func TestSysctls(t *testing.T) {
	allowed := []string{"kernel.msg*", "kernel.sem", "net.b.*"}
	tests := []struct {
		sysctl           string
		hostNet, hostIPC bool
		ok               bool
	}{
		{"kernel.shm_rmid_forced", false, false, true},
		{"kernel/shm_rmid_forced", false, false, true},
		{"net.ipv4.ip_local_port_range", false, false, true},
		{"kernel.msgmax", false, false, true},
		{"kernel.sem", false, false, true},
		{"kernel/sem", false, false, true},
		{"kernel.shm_rmid_forced", false, true, false},
		{"net.ipv4.ip_local_port_range", true, false, false},
		{"foo", false, false, false},
		{"net.a.b.c", false, false, false},
		{"net.ipv4.ip_local_port_range.a.b.c", false, false, false},
		{"kernel.msgmax", false, true, false},
		{"kernel.sem", false, true, false},
		{"net.b.c", true, false, false},
		{"vm.swappiness", false, false, false},
	}
	for _, tt := range tests {
		pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: tt.hostNet, HostIPC: tt.hostIPC,
			SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: tt.sysctl, Value: "1"}}}}}
		res := Admit(pod, Node{Host: Host{AllowedUnsafeSysctls: allowed}}, nil)
		if res.Admit != tt.ok || !tt.ok && res.Reason != ReasonSysctlForbidden {
			t.Errorf("%+v: %+v", tt, res)
		}
	}
}

func TestOSAndRuntimeFeatures(t *testing.T) {
	strict, merge := v1.SupplementalGroupsPolicyStrict, v1.SupplementalGroupsPolicyMerge
	no := false
	tests := []struct {
		name   string
		pod    func(*v1.Pod)
		host   Host
		reason string
	}{
		{"matching os label", func(p *v1.Pod) { p.Labels = map[string]string{v1.LabelOSStable: "linux"} }, Host{}, ""},
		{"os label of another OS", func(p *v1.Pod) { p.Labels = map[string]string{v1.LabelOSStable: "windows"} }, Host{}, ReasonOSSelector},
		{"spec.os linux", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Linux} }, Host{}, ""},
		{"spec.os windows", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} }, Host{}, ReasonOSNotSupported},
		{"strict groups, unsupported", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict}
		}, Host{}, ReasonSupplementalGroupsPolicy},
		{"merge groups need nothing", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &merge}
		}, Host{}, ""},
		{"strict groups, supported", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict}
		}, Host{SupplementalGroupsPolicy: true}, ""},
		{"apparmor runtime default, no apparmor", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
		}, Host{}, ReasonAppArmor},
		{"apparmor in a container's annotation", func(p *v1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}
		}, Host{}, ReasonAppArmor},
		{"apparmor unconfined needs nothing", func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}}
		}, Host{}, ""},
		{"apparmor on a host with it", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
		}, Host{AppArmor: true}, ""},
		{"user namespace, unsupported", func(p *v1.Pod) { p.Spec.HostUsers = &no }, Host{}, ReasonUserNamespacesNotSupported},
		{"user namespace, supported", func(p *v1.Pod) { p.Spec.HostUsers = &no }, Host{UserNamespaces: true}, ""},
	}
	for _, tt := range tests {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
		tt.pod(pod)
		res := Admit(pod, Node{Host: tt.host}, nil)
		if res.Admit != (tt.reason == "") || res.Reason != tt.reason {
			t.Errorf("%s: %+v, want reason %q", tt.name, res, tt.reason)
		}
	}
}
