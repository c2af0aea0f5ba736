package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// volumeTree makes a volume with a directory, a file, a symlink inside, and symlinks out of it.
func volumeTree(t *testing.T) string {
	t.Helper()
	vol := filepath.Join(t.TempDir(), "vol")
	for _, d := range []string{"dir/sub", "real"} {
		if err := os.MkdirAll(filepath.Join(vol, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(vol, "dir", "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"inside": "real", "out": "/", "outrel": "../..", "dir/up": "../../.."} {
		if err := os.Symlink(to, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	return vol
}

func TestOpenBeneathRefusesSymlinks(t *testing.T) {
	vol := volumeTree(t)
	tests := []struct {
		rel string
		ok  bool
	}{
		{"dir", true},
		{"dir/sub", true},
		{"dir/file", true},
		{".", true},
		{"inside", false}, // a symlink, even one that stays inside: resolve first, then open
		{"out", false},
		{"outrel", false},
		{"dir/up", false},
		{"dir/../../x", false},
	}
	for _, walk := range []bool{false, true} {
		for _, tt := range tests {
			var fd int
			var err error
			if walk {
				root, oerr := unix.Open(vol, unix.O_PATH|unix.O_DIRECTORY, 0)
				if oerr != nil {
					t.Fatal(oerr)
				}
				fd, err = openWalk(root, tt.rel)
				unix.Close(root)
			} else {
				fd, err = openBeneath(vol, tt.rel)
			}
			if err == nil {
				unix.Close(fd)
			}
			if (err == nil) != tt.ok {
				t.Errorf("walk %v, %q: err %v, want ok %v", walk, tt.rel, err, tt.ok)
			}
		}
	}
}

// Paths that are absolute, climb out, or resolve out of the volume are refused before anything is mounted.
func TestBindSubPathRefusesEscapes(t *testing.T) {
	vol := volumeTree(t)
	target := filepath.Join(t.TempDir(), "target")
	for _, sub := range []string{"/etc", "../x", "dir/../../x", "out", "out/etc", "outrel", "dir/up", "dir/up/etc", ""} {
		err := BindSubPath(vol, sub, target)
		if !errors.Is(err, ErrUnsafeSubPath) {
			t.Errorf("subPath %q: err %v, want ErrUnsafeSubPath", sub, err)
		}
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target made for a refused subPath: %v", err)
	}
	// A missing directory is made inside the volume, never through a link out of it.
	if err := BindSubPath(vol, "out/nodeagent-subpath-test", target); !errors.Is(err, ErrUnsafeSubPath) {
		t.Errorf("creating through a link out: %v", err)
	}
	if _, err := os.Lstat("/nodeagent-subpath-test"); err == nil {
		t.Fatal("a directory was made outside the volume")
	}
}

func TestCleanSubPathsWithoutMounts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "volume-subpaths")
	if err := os.MkdirAll(filepath.Join(dir, "v", "c"), 0o750); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "v", "c", "0")); err != nil {
		t.Fatal(err)
	}
	if err := CleanSubPaths(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("a file behind a link was removed: %v", err)
	}
	if err := CleanSubPaths(dir); err != nil {
		t.Errorf("a second clean: %v", err)
	}
}
