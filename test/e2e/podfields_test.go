//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The pod spec fields applications and charts set work as upstream's kubelet runs them, on both runtime
// backends: readinessGates, FallbackToLogsOnError, activeDeadlineSeconds, DNS policies, shared and host
// namespaces, seccomp profiles, supplemental groups and the default masked /proc.
func TestKubeletPodFields(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		t.Run("readinessGates", func(t *testing.T) { testReadinessGates(t, n.in(t)) })
		t.Run("FallbackToLogsOnError", func(t *testing.T) { testFallbackToLogs(t, n.in(t)) })
		t.Run("activeDeadlineSeconds", func(t *testing.T) { testActiveDeadline(t, n.in(t)) })
		t.Run("dnsPolicy", func(t *testing.T) { testDNSPolicy(t, n.in(t)) })
		t.Run("namespaces", func(t *testing.T) { testNamespaces(t, n.in(t)) })
		t.Run("seccompProfile", func(t *testing.T) { testSeccomp(t, n.in(t)) })
		t.Run("groups", func(t *testing.T) { testGroups(t, n.in(t)) })
	}, "--cluster-dns", "10.96.0.10", "--cluster-domain", "cluster.local")
}

func condition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func terminated(p *v1.Pod) error {
	if cs := p.Status.ContainerStatuses; len(cs) == 0 || cs[0].State.Terminated == nil {
		return fmt.Errorf("not terminated: %+v", p.Status.ContainerStatuses)
	}
	return nil
}

// The pod is Ready only once its gate's condition, set through the API, is True; containers are ready
// before.
func testReadinessGates(t *testing.T, n *node) {
	p := busyboxPod("gated", "sleep", "3600")
	p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb-ready"}}
	n.createPod(p)
	n.waitPod("gated", 60*time.Second, "containers ready, the pod not", func(p *v1.Pod) error {
		cr, r := condition(p, v1.ContainersReady), condition(p, v1.PodReady)
		if cr == nil || cr.Status != v1.ConditionTrue {
			return fmt.Errorf("ContainersReady %+v", cr)
		}
		if r == nil || r.Status != v1.ConditionFalse || r.Reason != "ReadinessGatesNotReady" {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
	patch := `{"status":{"conditions":[{"type":"example.com/lb-ready","status":"True","lastTransitionTime":"` +
		time.Now().UTC().Format(time.RFC3339) + `"}]}}`
	if _, err := n.client.CoreV1().Pods("default").Patch(context.Background(), "gated", types.StrategicMergePatchType,
		[]byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	got := n.waitPod("gated", 30*time.Second, "the pod ready once its gate is True", ready)
	if c := condition(got, "example.com/lb-ready"); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("the gate's condition was not kept: %+v", got.Status.Conditions)
	}
}

// A failed container that wrote no termination message gets its log's tail: 80 lines, at most 2 KiB.
func testFallbackToLogs(t *testing.T, n *node) {
	p := busyboxPod("fallback", "sh", "-c", "i=1; while [ $i -le 100 ]; do echo line $i; i=$((i+1)); done; exit 3")
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	p.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	long := busyboxPod("fallback-long", "sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x; echo; echo end; exit 1")
	long.Spec.RestartPolicy = v1.RestartPolicyNever
	long.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	n.createPod(p)
	n.createPod(long)
	term := n.waitPod("fallback", 60*time.Second, "the container failed", terminated).Status.ContainerStatuses[0].State.Terminated
	lines := strings.Split(strings.TrimSuffix(term.Message, "\n"), "\n")
	if term.ExitCode != 3 || len(lines) != 80 || lines[0] != "line 21" || lines[79] != "line 100" {
		t.Errorf("exit %d, message of %d lines, %q ... %q; want the last 80 lines", term.ExitCode, len(lines), lines[0], lines[len(lines)-1])
	}
	term = n.waitPod("fallback-long", 60*time.Second, "the container failed", terminated).Status.ContainerStatuses[0].State.Terminated
	if len(term.Message) != 2048 || !strings.HasSuffix(term.Message, "\nend\n") && !strings.HasSuffix(term.Message, "\nend") {
		t.Errorf("message of %d bytes ending %q; want the last 2048 bytes", len(term.Message), term.Message[max(0, len(term.Message)-8):])
	}
}

// A pod past its activeDeadlineSeconds is failed with DeadlineExceeded and its containers stopped.
func testActiveDeadline(t *testing.T, n *node) {
	p := busyboxPod("deadline", "sleep", "3600")
	p.Spec.ActiveDeadlineSeconds = ptrInt64(3)
	n.createPod(p)
	got := n.waitPod("deadline", 60*time.Second, "the pod failed past its deadline", func(p *v1.Pod) error {
		if p.Status.Phase != v1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return terminated(p)
	})
	if got.Status.Reason != "DeadlineExceeded" || got.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q", got.Status.Reason, got.Status.Message)
	}
}

// /etc/resolv.conf as upstream writes it: ClusterFirst with --cluster-dns and the search path,
// ClusterFirst merged with dnsConfig, Default the node's file, None only dnsConfig, and host-network pods
// under ClusterFirst the node's file.
func testDNSPolicy(t *testing.T, n *node) {
	ndots, two := "ndots", "2"
	hostResolv := n.hostResolvConf(t)
	for _, tc := range []struct {
		name      string
		policy    v1.DNSPolicy
		hostNet   bool
		config    *v1.PodDNSConfig
		want      []string // lines
		wantExact string
	}{
		{name: "dns-cluster-first", policy: v1.DNSClusterFirst, want: []string{
			"nameserver 10.96.0.10", "search default.svc.cluster.local svc.cluster.local cluster.local", "options ndots:5"}},
		{name: "dns-merged", policy: v1.DNSClusterFirst, config: &v1.PodDNSConfig{
			Nameservers: []string{"10.0.0.53"}, Searches: []string{"example.com"}, Options: []v1.PodDNSConfigOption{{Name: ndots, Value: &two}}},
			want: []string{"nameserver 10.96.0.10", "nameserver 10.0.0.53",
				"search default.svc.cluster.local svc.cluster.local cluster.local example.com", "options ndots:2"}},
		{name: "dns-none", policy: v1.DNSNone, config: &v1.PodDNSConfig{Nameservers: []string{"10.0.0.53"}, Searches: []string{"example.com"}},
			wantExact: "search example.com\nnameserver 10.0.0.53\n"}, // containerd's layout
		{name: "dns-default", policy: v1.DNSDefault, want: hostResolv},
		{name: "dns-hostnet", policy: v1.DNSClusterFirst, hostNet: true, want: hostResolv},
		{name: "dns-hostnet-cluster", policy: v1.DNSClusterFirstWithHostNet, hostNet: true, want: []string{"nameserver 10.96.0.10"}},
	} {
		p := busyboxPod(tc.name, "sh", "-c", "cat /etc/resolv.conf; exec sleep 3600")
		p.Spec.DNSPolicy, p.Spec.DNSConfig, p.Spec.HostNetwork = tc.policy, tc.config, tc.hostNet
		n.createPod(p)
		n.waitPod(tc.name, 60*time.Second, tc.name+" ready", ready)
		out := n.podLogs(t, tc.name, "main")
		if tc.wantExact != "" && out != tc.wantExact {
			t.Errorf("%s: resolv.conf %q, want %q", tc.name, out, tc.wantExact)
		}
		for _, line := range tc.want {
			if !strings.Contains("\n"+out, "\n"+line+"\n") {
				t.Errorf("%s: resolv.conf lacks %q:\n%s", tc.name, line, out)
			}
		}
	}
}

// hostResolvConf is the nameserver and search lines of the node's resolver configuration, which pods with
// dnsPolicy Default get.
func (n *node) hostResolvConf(t *testing.T) []string {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "nameserver ") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return out
}

// shareProcessNamespace lets one container see the other's processes; hostPID and hostIPC are the node's
// namespaces; other pods have their own.
func testNamespaces(t *testing.T, n *node) {
	shared := busyboxPod("shared-pid", "sleep", "3600")
	yes := true
	shared.Spec.ShareProcessNamespace = &yes
	shared.Spec.Containers = append(shared.Spec.Containers, v1.Container{Name: "peer", Image: busyboxImage, Command: []string{"sleep", "3601"}})
	host := busyboxPod("host-ns", "sleep", "3600")
	host.Spec.HostPID, host.Spec.HostIPC = true, true
	own := busyboxPod("own-ns", "sleep", "3600")
	for _, p := range []*v1.Pod{shared, host, own} {
		n.createPod(p)
	}
	for _, p := range []*v1.Pod{shared, host, own} {
		n.waitPod(p.Name, 60*time.Second, p.Name+" ready", ready)
	}
	if out, err := n.exec("shared-pid", "main", "ps", "-o", "args"); err != nil || !strings.Contains(out, "sleep 3601") || !strings.Contains(out, "pause") {
		t.Errorf("shareProcessNamespace: ps shows %q, %v; want the peer's sleep and the pause process", out, err)
	}
	hostPID, _ := os.Readlink("/proc/self/ns/pid")
	hostIPC, _ := os.Readlink("/proc/self/ns/ipc")
	for _, tc := range []struct {
		pod  string
		same bool
	}{{"host-ns", true}, {"own-ns", false}} {
		for ns, want := range map[string]string{"pid": hostPID, "ipc": hostIPC} {
			out, err := n.exec(tc.pod, "main", "readlink", "/proc/self/ns/"+ns)
			if err != nil || (strings.TrimSpace(out) == want) != tc.same {
				t.Errorf("%s: %s namespace %q (node's %q), %v; want the node's: %v", tc.pod, ns, strings.TrimSpace(out), want, err, tc.same)
			}
		}
	}
	// The default procMount masks /proc/timer_list (an empty file in the pod) and keeps /proc/sys read-only.
	// (stderr is dropped: the shell's complaint would interleave with the count in the combined output)
	out, _ := n.exec("own-ns", "main", "sh", "-c", "exec 2>/dev/null; wc -c < /proc/timer_list; echo 1 > /proc/sys/kernel/panic && echo writable")
	if host, err := os.ReadFile("/proc/timer_list"); err == nil && len(host) > 0 &&
		(!strings.Contains("\n"+out, "\n0\n") || strings.Contains(out, "writable")) {
		t.Errorf("masked /proc in the pod: %q", out)
	}
}

// seccompProfile: RuntimeDefault and Localhost profiles filter (Seccomp: 2 in /proc/self/status),
// Unconfined does not; a Localhost profile is a file under <root-dir>/seccomp and one that would leave it is
// refused.
func testSeccomp(t *testing.T, n *node) {
	dir := filepath.Join(n.dir, "root", "seccomp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Allow everything but mkdir/mkdirat, which fail with EPERM.
	profile := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`
	if err := os.WriteFile(filepath.Join(dir, "no-mkdir.json"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	withProfile := func(name string, sp *v1.SeccompProfile) *v1.Pod {
		p := busyboxPod(name, "sh", "-c", "grep '^Seccomp:' /proc/self/status; mkdir /tmp/x && echo mkdir-ok; exec sleep 3600")
		p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: sp}
		return p
	}
	local, escape := "no-mkdir.json", "../../../etc/passwd"
	for _, tc := range []struct {
		pod     *v1.Pod
		seccomp string
		mkdir   bool
	}{
		{withProfile("seccomp-default", &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}), "Seccomp:\t2", true},
		{withProfile("seccomp-unconfined", &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}), "Seccomp:\t0", true},
		{withProfile("seccomp-local", &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &local}), "Seccomp:\t2", false},
	} {
		n.createPod(tc.pod)
		n.waitPod(tc.pod.Name, 60*time.Second, tc.pod.Name+" ready", ready)
		out := n.podLogs(t, tc.pod.Name, "main")
		if !strings.Contains(out, tc.seccomp+"\n") || strings.Contains(out, "mkdir-ok") != tc.mkdir {
			t.Errorf("%s: %q, want %q and mkdir allowed: %v", tc.pod.Name, out, tc.seccomp, tc.mkdir)
		}
	}
	n.createPod(withProfile("seccomp-escape", &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &escape}))
	n.waitPod("seccomp-escape", 60*time.Second, "the escaping profile refused", func(p *v1.Pod) error {
		if cs := p.Status.ContainerStatuses; len(cs) == 0 || cs[0].State.Waiting == nil ||
			cs[0].State.Waiting.Reason != "CreateContainerConfigError" || !strings.Contains(cs[0].State.Waiting.Message, "localhostProfile") {
			return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
		}
		return nil
	})
}

// supplementalGroups and fsGroup are the process's groups beside runAsGroup.
func testGroups(t *testing.T, n *node) {
	uid, gid, fs := int64(1000), int64(3000), int64(4000)
	p := busyboxPod("groups", "sh", "-c", "id -u; id -g; id -G; exec sleep 3600")
	p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid, FSGroup: &fs, SupplementalGroups: []int64{5000, 5001}}
	n.createPod(p)
	n.waitPod("groups", 60*time.Second, "the pod ready", ready)
	out := strings.Fields(n.podLogs(t, "groups", "main"))
	if len(out) < 3 || out[0] != "1000" || out[1] != "3000" {
		t.Fatalf("id: %q", out)
	}
	groups := strings.Join(out[2:], " ")
	for _, g := range []string{"3000", "4000", "5000", "5001"} {
		if !strings.Contains(" "+groups+" ", " "+g+" ") {
			t.Errorf("groups %q lack %s", groups, g)
		}
	}
}
