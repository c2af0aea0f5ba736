package nodeinit

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The supervisor names the daemon that ended and how, and stops the others with SIGTERM.
func TestSupervisor(t *testing.T) {
	s := newSupervisor()
	if err := s.start("quits", "/bin/sh", "-c", "exit 3"); err != nil {
		t.Fatal(err)
	}
	if err := s.start("kubelet", "/bin/sleep", "60"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	name, status := "", ""
	for name == "" && time.Now().Before(deadline) {
		name, status = s.reap()
		time.Sleep(20 * time.Millisecond)
	}
	if name != "quits" || status != "exit status 3" {
		t.Fatalf("reaped %q (%s), want quits with exit status 3", name, status)
	}
	start := time.Now()
	s.stopAll(5 * time.Second)
	if time.Since(start) > 4*time.Second {
		t.Fatalf("stopAll took %v: SIGTERM did not end sleep", time.Since(start))
	}
	if name, status := s.reap(); name != "" {
		t.Fatalf("a daemon left after stopAll: %s %s", name, status)
	}
	if err := s.start("missing", "/nonexistent/binary"); err == nil {
		t.Fatal("starting a missing binary succeeded")
	}
}

// The kubelet's --client-ca-file comes from the node's kubeconfig: its cluster's CA.
func TestWriteClusterCA(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, kubeconfig, want string
		wantErr                bool
	}{
		{"cluster CA", "clusters:\n- name: c\n  cluster:\n    server: https://10.0.0.2:6443\n    certificate-authority-data: UEVN\n", "PEM", false},
		{"no CA", "clusters:\n- name: c\n  cluster:\n    server: https://10.0.0.2:6443\n", "", true},
		{"no cluster", "users: []\n", "", true},
	} {
		kc, ca := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "client-ca.crt")
		_ = os.Remove(ca)
		if err := os.WriteFile(kc, []byte(tc.kubeconfig), 0o600); err != nil {
			t.Fatal(err)
		}
		err := writeClusterCA(kc, ca)
		got, _ := os.ReadFile(ca)
		if (err != nil) != tc.wantErr || string(got) != tc.want {
			t.Errorf("%s: wrote %q, %v", tc.name, got, err)
		}
	}
}
