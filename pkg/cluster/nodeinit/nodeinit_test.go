package nodeinit

import (
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
