package runtime

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
)

func TestSharedRootDir(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mounts []mount.Mount
		want   string
		ok     bool
	}{
		{"overlayfs view of one layer", []mount.Mount{{Type: "bind", Source: "/snapshots/3/fs", Options: []string{"ro", "rbind"}}}, "/snapshots/3/fs", true},
		{"view of several layers", []mount.Mount{{Type: "overlay", Source: "overlay", Options: []string{"lowerdir=/a:/b"}}}, "", false},
		{"writable bind", []mount.Mount{{Type: "bind", Source: "/snapshots/3/fs", Options: []string{"rw", "rbind"}}}, "", false},
		{"relative source", []mount.Mount{{Type: "bind", Source: "fs", Options: []string{"ro", "rbind"}}}, "", false},
		{"two mounts", []mount.Mount{{Type: "bind", Source: "/a", Options: []string{"ro"}}, {Type: "bind", Source: "/b", Options: []string{"ro"}}}, "", false},
		{"none", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := sharedRootDir(tc.mounts)
			if got != tc.want || ok != tc.ok {
				t.Errorf("sharedRootDir = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestHasDirs(t *testing.T) {
	root := t.TempDir()
	if hasDirs(root, pauseRootDirs) {
		t.Fatal("an empty root has the pause mount points")
	}
	if err := os.Mkdir(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "dev"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if hasDirs(root, pauseRootDirs) {
		t.Fatal("a root whose dev is a file has the pause mount points")
	}
	if err := os.Remove(filepath.Join(root, "dev")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !hasDirs(root, pauseRootDirs) {
		t.Fatal("a root with proc and dev directories lacks the pause mount points")
	}
}
