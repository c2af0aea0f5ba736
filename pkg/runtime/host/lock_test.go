package host

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// One process serves a namespace: a second lock on it is refused with the holder named, another namespace
// is free, and a released lock can be taken again.
func TestLockNamespace(t *testing.T) {
	dir := t.TempDir()
	first, err := LockNamespace(dir, "pods")
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockNamespace(dir, "pods")
	if err == nil {
		t.Fatal("a second lock on the namespace was granted")
	}
	if want := fmt.Sprintf("pid %d", os.Getpid()); !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), `already serves containerd namespace "pods"`) {
		t.Errorf("refusal %q does not name the holder (%s) and the namespace", err, want)
	}
	other, err := LockNamespace(dir, "other")
	if err != nil {
		t.Fatalf("another namespace: %v", err)
	}
	other.Release()
	first.Release()
	again, err := LockNamespace(dir, "pods")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
	for _, bad := range []string{"", "a/b", "..", "."} {
		if _, err := LockNamespace(dir, bad); err == nil {
			t.Errorf("namespace %q accepted", bad)
		}
	}
}
