package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLayerEntriesErrors(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"empty path", Spec{Dirs: []Dir{{Path: ""}}}, "empty path"},
		{"root", Spec{Dirs: []Dir{{Path: "/"}}}, "image root"},
		{"dot dot to root", Spec{Files: []File{{Path: "/a/../..", Data: nil}}}, "image root"},
		{"duplicate", Spec{Files: []File{{Path: "/a"}}, Symlinks: []Symlink{{Path: "a", Target: "b"}}}, "listed twice"},
		{"parent is file", Spec{Files: []File{{Path: "/a"}, {Path: "/a/b"}}}, "not a directory"},
		{"parent is symlink", Spec{Files: []File{{Path: "/bin/x"}}, Symlinks: []Symlink{{Path: "/bin", Target: "usr/bin"}}}, "not a directory"},
		{"symlink without target", Spec{Symlinks: []Symlink{{Path: "/a"}}}, "empty target"},
		{"source and data", Spec{Files: []File{{Path: "/a", Source: "/etc/hostname", Data: []byte("x")}}}, "both Source and Data"},
		{"missing source", Spec{Files: []File{{Path: "/a", Source: "/nonexistent/file"}}}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := layerEntries(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

type tarEntry struct {
	typ      byte
	mode     int64
	uid, gid int
	link     string
	data     string
}

func readTar(t *testing.T, data []byte) ([]string, map[string]tarEntry) {
	t.Helper()
	var order []string
	got := map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		if !hdr.ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want %v", hdr.Name, hdr.ModTime, epoch)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", hdr.Name, err)
		}
		order = append(order, hdr.Name)
		got[hdr.Name] = tarEntry{hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Linkname, string(b)}
	}
	return order, got
}

func TestBuildLayer(t *testing.T) {
	src := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	spec := Spec{
		Files: []File{
			{Path: "/usr/bin/prog", Source: src},
			{Path: "etc/motd", Data: []byte("hi\n")},
			{Path: "/bin/su", Data: []byte("x"), Mode: 0o755 | fs.ModeSetuid},
		},
		Dirs:     []Dir{{Path: "/tmp", Mode: 0o777 | fs.ModeSticky}, {Path: "/home/u", UID: 1000, GID: 1001}},
		Symlinks: []Symlink{{Path: "/bin/sh", Target: "/usr/bin/prog"}},
	}
	tarData, _, err := buildLayer(spec)
	if err != nil {
		t.Fatal(err)
	}
	order, got := readTar(t, tarData)

	wantOrder := []string{"bin/", "bin/sh", "bin/su", "etc/", "etc/motd", "home/", "home/u/", "tmp/", "usr/", "usr/bin/", "usr/bin/prog"}
	if strings.Join(order, " ") != strings.Join(wantOrder, " ") {
		t.Fatalf("entries = %v, want %v", order, wantOrder)
	}
	want := map[string]tarEntry{
		"bin/":         {typ: tar.TypeDir, mode: 0o755},
		"bin/sh":       {typ: tar.TypeSymlink, mode: 0o777, link: "/usr/bin/prog"},
		"bin/su":       {typ: tar.TypeReg, mode: 0o4755, data: "x"},
		"etc/motd":     {typ: tar.TypeReg, mode: 0o644, data: "hi\n"},
		"home/u/":      {typ: tar.TypeDir, mode: 0o755, uid: 1000, gid: 1001},
		"tmp/":         {typ: tar.TypeDir, mode: 0o1777},
		"usr/bin/prog": {typ: tar.TypeReg, mode: 0o750, data: "#!/bin/sh\n"},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s = %+v, want %+v", name, got[name], w)
		}
	}
}
