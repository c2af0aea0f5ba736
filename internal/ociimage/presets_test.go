package ociimage

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBusyboxApplets(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "busybox")
	script := "#!/bin/sh\nprintf 'sh\\nls\\nbusybox\\n\\n[\\nbad/name\\n'\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := BusyboxApplets(context.Background(), fake)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "[ ls sh" {
		t.Errorf("applets = %v", got)
	}
	if _, err := BusyboxApplets(context.Background(), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("want an error for a missing binary")
	}
}

func TestBusyboxLayer(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(bin, []byte("ELF"), 0o700); err != nil {
		t.Fatal(err)
	}
	tarData, _, err := buildLayer(Busybox(bin, []string{"sh", "ls"}))
	if err != nil {
		t.Fatal(err)
	}
	_, files := readTar(t, tarData)
	checks := map[string]tarEntry{
		"bin/busybox": {typ: '0', mode: 0o755, data: "ELF"},
		"bin/sh":      {typ: '2', mode: 0o777, link: "busybox"},
		"bin/ls":      {typ: '2', mode: 0o777, link: "busybox"},
		"tmp/":        {typ: '5', mode: 0o1777},
		"home/user/":  {typ: '5', mode: 0o755, uid: 1000, gid: 1000},
	}
	for name, want := range checks {
		if files[name] != want {
			t.Errorf("%s = %+v, want %+v", name, files[name], want)
		}
	}
	for _, line := range []string{"root:x:0:0:", "nobody:x:65534:65534:", "user:x:1000:1000:"} {
		if !strings.Contains(files["etc/passwd"].data, line) {
			t.Errorf("/etc/passwd lacks %q", line)
		}
	}
	for _, line := range []string{"root:x:0:", "nogroup:x:65534:", "user:x:1000:"} {
		if !strings.Contains(files["etc/group"].data, line) {
			t.Errorf("/etc/group lacks %q", line)
		}
	}
}

func TestPauseSpec(t *testing.T) {
	s := Pause("/some/pause")
	if len(s.Files) != 1 || s.Files[0].Path != "/pause" || s.Files[0].Mode != 0o755 {
		t.Errorf("files = %+v", s.Files)
	}
	if strings.Join(s.Config.Entrypoint, " ") != "/pause" {
		t.Errorf("entrypoint = %v", s.Config.Entrypoint)
	}
}
