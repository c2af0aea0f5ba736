//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// spec.hostnameOverride (HostnameOverride, on in 1.35) is the pod's hostname, over spec.hostname and
// spec.subdomain, and its /etc/hosts names the pod's IP with it, as upstream's kubelet writes it.
func TestKubeletHostnameOverride(t *testing.T) {
	parallel(t)
	n := startNode(t)
	p := busyboxPod("override", "sh", "-c", "hostname; cat /etc/hosts; exec sleep 3600")
	override := "my-host.example"
	p.Spec.HostnameOverride = &override
	p.Spec.Hostname, p.Spec.Subdomain = "ignored", "sub"
	n.createPod(p)
	pod := n.waitPod("override", 60*time.Second, "the pod ready", ready)
	out := n.podLogs(t, "override", "main")
	lines := strings.SplitN(out, "\n", 2)
	if lines[0] != override {
		t.Errorf("hostname %q, want %q", lines[0], override)
	}
	if want := pod.Status.PodIP + "\t" + override + "\n"; !strings.Contains(out, want) {
		t.Errorf("/etc/hosts lacks %q:\n%s", want, out)
	}
}
