//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// goroutines reads the kubelet's goroutine count from its pprof endpoint, through the API server.
func (n *node) goroutines(t *testing.T) int {
	t.Helper()
	count, _ := n.goroutineProfile(t)
	return count
}

// goroutineProfile reads the kubelet's goroutine count and its grouped profile (pprof's debug=1 form).
func (n *node) goroutineProfile(t *testing.T) (int, string) {
	t.Helper()
	data, err := n.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.name, "proxy", "debug", "pprof", "goroutine").
		Param("debug", "1").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("goroutine profile: %v", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	total, ok := strings.CutPrefix(first, "goroutine profile: total ")
	if !ok {
		t.Fatalf("goroutine profile starts %q", first)
	}
	count, err := strconv.Atoi(total)
	if err != nil {
		t.Fatalf("goroutine profile starts %q", first)
	}
	return count, string(data)
}

// largestGroups returns the goroutine groups of a debug=1 profile holding at least min goroutines each
// (their count line and stack), largest first: what a leak left behind.
func largestGroups(profile string, min int) string {
	type group struct {
		n    int
		text string
	}
	var groups []group
	_, body, _ := strings.Cut(profile, "\n") // after the "goroutine profile: total N" line
	for _, block := range strings.Split(body, "\n\n") {
		var n int
		if _, err := fmt.Sscanf(block, "%d @", &n); err == nil && n >= min {
			groups = append(groups, group{n, block})
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].n > groups[j].n })
	var b strings.Builder
	for i, g := range groups {
		if i == 5 {
			break
		}
		b.WriteString(g.text + "\n\n")
	}
	return b.String()
}

// Probes that cannot work fail with a message saying why, a probe the API must refuse is refused, and 100
// probed pods leave no goroutine behind once deleted (issue: the kubelet does not hang or leak).
func TestKubeletProbesBadInput(t *testing.T) {
	parallel(t)
	n := startNode(t)
	ctx := context.Background()
	p1 := func(h v1.ProbeHandler) *v1.Probe { return probe(h, 1) }

	// Refused by the API server's validation: a negative period (zero is defaulted to 10 s).
	bad := busyboxPod("negative-period", "sleep", "3600")
	bad.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: execHandler("true"), PeriodSeconds: -5}
	if _, err := n.client.CoreV1().Pods("default").Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -5: must be greater than or equal to 0") {
		t.Errorf("a negative period: %v", err)
	}

	cases := []struct {
		pod, want string
		probe     *v1.Probe
		reason    string
	}{
		{"closed-port", "dial tcp", p1(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(9999)}}), "Unhealthy"},
		{"missing-name", `port "metrics" not found`, p1(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromString("metrics")}}), "Unhealthy"},
		{"missing-binary", "no-such-binary", p1(execHandler("/no-such-binary")), "Unhealthy"},
		{"grpc-nothing", "failed to connect service", p1(v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9998}}), "Unhealthy"},
	}
	for _, c := range cases {
		pod := busyboxPod(c.pod, "sleep", "3600")
		pod.Spec.Containers[0].ReadinessProbe = c.probe
		n.createPod(pod)
	}
	// A redirect to another host is not followed: the probe succeeds, with a warning (nothing is sent there).
	redirect := busyboxPod("redirect", "sh", "-c",
		`while true; do printf 'HTTP/1.1 302 Found\r\nLocation: http://192.0.2.1/x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' | nc -l -p 8080; done`)
	redirect.Spec.Containers[0].ReadinessProbe = p1(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}})
	n.createPod(redirect)

	for _, c := range cases {
		eventually(t, 60*time.Second, c.pod+" probe failure says why", func() error {
			return hasEventLike(n, t, c.pod, c.reason, c.want)
		})
		if p := n.waitPod(c.pod, 10*time.Second, "running, not Ready", notReady); p.Status.ContainerStatuses[0].Ready {
			t.Errorf("%s: Ready with a failing probe", c.pod)
		}
	}
	n.waitPod("redirect", 60*time.Second, "Ready: a redirect elsewhere is a success", ready)
	eventually(t, 30*time.Second, "ProbeWarning", func() error {
		return hasEventLike(n, t, "redirect", "ProbeWarning", "Probe terminated redirects")
	})
	for _, name := range []string{"closed-port", "missing-name", "missing-binary", "grpc-nothing", "redirect"} {
		n.deletePodAndWait(t, name)
	}

	// 60 probed pods (one of each handler), deleted: the goroutine count comes back to where it was. (The
	// benchmark runs 110: `hack/bench kubelet --only probes`.)
	time.Sleep(3 * time.Second)
	baseline := n.goroutines(t)
	const pods = 60
	names := make([]string, pods)
	for i := range pods {
		names[i] = fmt.Sprintf("probed-%03d", i)
		pod := busyboxPod(names[i], "sh", "-c", "touch /tmp/ready; mkdir -p /w; echo ok > /w/index.html; exec httpd -f -p 8080 -h /w")
		pod.Spec.TerminationGracePeriodSeconds = ptrInt64(1)
		c := &pod.Spec.Containers[0]
		// Periods as pods have them (a probe a second per container would be 300 a second on two cores).
		c.ReadinessProbe = &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/ready"), PeriodSeconds: 5, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3}
		c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 10, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3}
		c.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 2, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 60}
		n.createPod(pod)
	}
	for _, name := range names {
		n.waitPod(name, 3*time.Minute, "Ready", ready)
	}
	for _, name := range names {
		if p := n.waitPod(name, time.Second, "Ready", ready); p.Status.ContainerStatuses[0].RestartCount > 0 {
			t.Errorf("%s restarted %d times: its probes failed under load", name, p.Status.ContainerStatuses[0].RestartCount)
		}
	}
	if during := n.goroutines(t); during < baseline+3*pods {
		t.Errorf("with %d probed pods %d goroutines, baseline %d: their probe workers do not run", pods, during, baseline)
	}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	eventually(t, 3*time.Minute, "probed pods gone", func() error {
		l, err := n.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) > 0 {
			return fmt.Errorf("%d pods left (%v)", len(l.Items), err)
		}
		return nil
	})
	// Connections and timers of the last probes take a moment to end.
	var profile string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var now int
		if now, profile = n.goroutineProfile(t); now <= baseline+10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines back to the baseline: %d goroutines, baseline %d; the largest groups:\n%s",
				now, baseline, largestGroups(profile, 10))
		}
	}
}
