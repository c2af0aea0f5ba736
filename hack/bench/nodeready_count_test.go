package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNRResource(t *testing.T) {
	cases := []struct{ url, want string }{
		{"https://127.0.0.1:6443/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1?timeout=10s", "leases"},
		{"https://127.0.0.1:6443/api/v1/namespaces/default/pods/p1/status", "pods_status"},
		{"https://127.0.0.1:6443/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=true", "pods"},
		{"https://127.0.0.1:6443/api/v1/nodes/n1", "nodes"},
		{"https://127.0.0.1:6443/api/v1/nodes/n1/status", "nodes_status"},
		{"https://127.0.0.1:6443/api/v1/namespaces/default/events", "events"},
		{"https://127.0.0.1:6443/version", "other"},
	}
	for _, c := range cases {
		if got := nrResource(c.url); got != c.want {
			t.Errorf("nrResource(%s) = %q, want %q", c.url, got, c.want)
		}
	}
}

func TestNRCountLogAndAudit(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "kubelet.log")
	lines := `I1121 07:00:00.000001 1 round_trippers.go:632] "Response" verb="PUT" url="https://h/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1" status="200 OK" milliseconds=2
I1121 07:00:01.000001 1 other.go:1] "Something else"
I1121 07:00:02.000001 1 round_trippers.go:632] "Response" verb="GET" url="https://h/api/v1/pods?watch=true" status="200 OK" milliseconds=1
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	counts, err := nrCountLog(log, 0, int64(len(lines)))
	if err != nil {
		t.Fatal(err)
	}
	if counts["put_leases"] != 1 || counts["watch_pods"] != 1 || len(counts) != 2 {
		t.Errorf("log counts %v", counts)
	}

	audit := filepath.Join(dir, "audit.log")
	events := `{"verb":"update","user":{"username":"system:node:n1"},"objectRef":{"resource":"leases"},"requestReceivedTimestamp":"2026-01-01T00:00:10.000000Z"}
{"verb":"patch","user":{"username":"system:node:n1"},"objectRef":{"resource":"pods","subresource":"status"},"requestReceivedTimestamp":"2026-01-01T00:00:20.000000Z"}
{"verb":"update","user":{"username":"system:node:n2"},"objectRef":{"resource":"leases"},"requestReceivedTimestamp":"2026-01-01T00:00:20.000000Z"}
{"verb":"update","user":{"username":"system:node:n1"},"objectRef":{"resource":"leases"},"requestReceivedTimestamp":"2026-01-01T00:01:00.000000Z"}
`
	if err := os.WriteFile(audit, []byte(events), 0o644); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	counts, err = nrCountAudit(audit, 0, "system:node:n1", from, from.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if counts["update_leases"] != 1 || counts["patch_pods_status"] != 1 || len(counts) != 2 {
		t.Errorf("audit counts %v", counts)
	}
}
