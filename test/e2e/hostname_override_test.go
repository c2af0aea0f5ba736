//go:build e2e

package e2e

import (
	"fmt"
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
	// Ready comes when the container starts; its output reaches the log a moment later (in CI the log once
	// held the hostname line alone).
	want := pod.Status.PodIP + "\t" + override + "\n"
	var out string
	eventually(t, 10*time.Second, "/etc/hosts naming the pod's IP with the override, in the container's log", func() error {
		if out = n.podLogs(t, "override", "main"); !strings.Contains(out, want) {
			return fmt.Errorf("the log lacks %q:\n%s", want, out)
		}
		return nil
	})
	if first, _, _ := strings.Cut(out, "\n"); first != override {
		t.Errorf("hostname %q, want %q", first, override)
	}
}
