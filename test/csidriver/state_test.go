package csidriver

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestStoreRoundTrip(t *testing.T) {
	s := store{dir: t.TempDir()}
	want := &Volume{
		ID: "vol-1", CapacityBytes: 10 << 30, Block: true, StagingPath: "/var/lib/kubelet/plugins/x/globalmount",
		LoopDevice: "/dev/loop3",
		Published: map[string]Publication{
			"/var/lib/kubelet/pods/u/volumes/v/mount": {ReadOnly: true, Block: true, AccessMode: "SINGLE_NODE_WRITER", MountFlags: []string{"noexec"}},
		},
	}
	if err := s.save(want); err != nil {
		t.Fatal(err)
	}
	got, err := s.load("vol-1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("load = %+v, want %+v", got, want)
	}
	if _, err := os.Stat(s.recordPath("vol-1") + tempSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left behind: %v", err)
	}

	// A second save replaces the record.
	want.CapacityBytes, want.LoopDevice = 11<<30, ""
	if err := s.save(want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.load("vol-1"); err != nil || got.CapacityBytes != 11<<30 || got.LoopDevice != "" {
		t.Errorf("load after a second save = %+v, %v", got, err)
	}

	if err := s.remove("vol-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.remove("vol-1"); err != nil {
		t.Errorf("remove of a removed record = %v, want nil", err)
	}
	if _, err := s.load("vol-1"); !errors.Is(err, errNoVolume) {
		t.Errorf("load after remove = %v, want errNoVolume", err)
	}
}

func TestStoreLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dir string)
		want    *Volume
		wantErr error // errNoVolume, or nil for any error when want is nil
	}{
		{name: "nothing", wantErr: errNoVolume},
		{name: "a directory without record is a static volume",
			setup: func(t *testing.T, dir string) { mkdir(t, filepath.Join(dir, "v")) },
			want:  &Volume{ID: "v", Static: true}},
		{name: "an image without record is a static block volume",
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "v.img"), "0123456789") },
			want:  &Volume{ID: "v", Static: true, Block: true, CapacityBytes: 10}},
		{name: "a symbolic link is refused, not followed",
			setup: func(t *testing.T, dir string) { symlink(t, "/etc", filepath.Join(dir, "v")) }},
		{name: "an image symbolic link is refused",
			setup: func(t *testing.T, dir string) { symlink(t, "/etc/passwd", filepath.Join(dir, "v.img")) }},
		{name: "a file where the directory belongs is refused",
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "v"), "") }},
		{name: "a corrupt record",
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "v.json"), "{") }},
		{name: "a record of another volume",
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "v.json"), `{"id":"w"}`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			got, err := store{dir: dir}.load("v")
			switch {
			case tc.want != nil:
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Errorf("load = %+v, %v; want %+v", got, err, tc.want)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("load = %+v, %v; want %v", got, err, tc.wantErr)
				}
			case err == nil || errors.Is(err, errNoVolume):
				t.Errorf("load = %+v, %v; want an error other than errNoVolume", got, err)
			}
		})
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
