package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// The atomic write replaces a file whole and with the asked mode.
func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" || modeOf(t, path) != 0o600 {
		t.Fatalf("got %q mode %o", b, modeOf(t, path))
	}
	if err := Write(filepath.Join(path, "x"), nil, 0o600); err == nil {
		t.Fatal("write under a file succeeded")
	}
}

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}
