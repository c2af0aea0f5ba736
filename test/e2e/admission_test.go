//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The kubelet admits what the node can honour and rejects the rest with upstream's reason, on both runtime
// backends: safe sysctls and those of --allowed-unsafe-sysctls are set in the pod's own namespaces (the
// host's stay as they were); other sysctls, net sysctls with the host's network, another OS, user
// namespaces on the built-in runtime (which runs none) and AppArmor profiles on a host without AppArmor are
// refused and nothing of the pod runs.
func TestKubeletAdmitsWhatTheHostHonours(t *testing.T) {
	parallel(t)
	hostKeepalive, err := os.ReadFile("/proc/sys/net/ipv4/tcp_keepalive_time")
	if err != nil {
		t.Fatal(err)
	}
	forEachRuntime(t, func(t *testing.T, n *node) {
		bound := func(p *v1.Pod) *v1.Pod { p.Spec.NodeName = n.name; return p }
		withSysctls := func(p *v1.Pod, kv ...string) *v1.Pod {
			p.Spec.SecurityContext = &v1.PodSecurityContext{}
			for i := 0; i+1 < len(kv); i += 2 {
				p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: kv[i], Value: kv[i+1]})
			}
			return p
		}

		n.createPod(bound(withSysctls(busyboxPod("sysctls", "sleep", "3600"),
			"net.ipv4.tcp_keepalive_time", "321", "net.core.somaxconn", "1234")))
		n.waitPod("sysctls", 60*time.Second, "the pod with a safe and an allowed sysctl ready", ready)
		for file, want := range map[string]string{"/proc/sys/net/ipv4/tcp_keepalive_time": "321", "/proc/sys/net/core/somaxconn": "1234"} {
			out, err := n.exec("sysctls", "main", "cat", file)
			if err != nil || strings.TrimSpace(out) != want {
				t.Errorf("%s in the pod: %q, %v; want %s", file, out, err, want)
			}
		}
		if now, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_keepalive_time"); string(now) != string(hostKeepalive) {
			t.Errorf("the host's tcp_keepalive_time changed: %q, was %q", now, hostKeepalive)
		}

		hostNet := withSysctls(busyboxPod("hostnet-sysctl", "sleep", "3600"), "net.ipv4.tcp_keepalive_time", "321")
		hostNet.Spec.HostNetwork = true
		windows := busyboxPod("windows", "sleep", "3600")
		windows.Spec.OS = &v1.PodOS{Name: v1.Windows}
		apparmor := busyboxPod("apparmor", "sleep", "3600")
		apparmor.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
		type refusal struct {
			pod            *v1.Pod
			reason, detail string
		}
		refusals := []refusal{
			{withSysctls(busyboxPod("unsafe-sysctl", "sleep", "3600"), "kernel.msgmax", "65536"), "SysctlForbidden", `"kernel.msgmax" not allowlisted`},
			{hostNet, "SysctlForbidden", "not allowed with host Net enabled"},
			{windows, "PodOSNotSupported", "OS field"},
			{apparmor, "AppArmor", "Cannot enforce AppArmor"},
		}
		for _, tc := range refusals {
			n.createPod(bound(tc.pod))
			got := n.waitPod(tc.pod.Name, 30*time.Second, tc.pod.Name+" rejected", func(p *v1.Pod) error {
				if p.Status.Phase != v1.PodFailed {
					return fmt.Errorf("phase %q", p.Status.Phase)
				}
				return nil
			})
			if got.Status.Reason != tc.reason || !strings.Contains(got.Status.Message, tc.detail) {
				t.Errorf("%s: reason %q message %q; want %s, %q", tc.pod.Name, got.Status.Reason, got.Status.Message, tc.reason, tc.detail)
			}
			if len(got.Status.ContainerStatuses) > 0 && got.Status.ContainerStatuses[0].State.Running != nil {
				t.Errorf("%s: a container of a rejected pod runs", tc.pod.Name)
			}
		}
	}, "--allowed-unsafe-sysctls", "net.core.somaxconn")
}
