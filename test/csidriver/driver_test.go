package csidriver

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{name: "defaults", cfg: Config{NodeID: "n", StateDir: filepath.Join(dir, "a", "b")}, ok: true},
		{name: "named", cfg: Config{DriverName: "x.example.com", NodeID: "n", StateDir: dir, MaxVolumesPerNode: 3}, ok: true},
		{name: "no node ID", cfg: Config{StateDir: dir}},
		{name: "no state directory", cfg: Config{NodeID: "n"}},
		{name: "a name that is no plugin name", cfg: Config{DriverName: "-x", NodeID: "n", StateDir: dir}},
		{name: "a name too long", cfg: Config{DriverName: strings.Repeat("a", 64), NodeID: "n", StateDir: dir}},
		{name: "negative limit", cfg: Config{NodeID: "n", StateDir: dir, MaxVolumesPerNode: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				return
			}
			if _, err := os.Stat(tc.cfg.StateDir); err != nil {
				t.Errorf("state directory: %v", err)
			}
			if tc.cfg.DriverName == "" && d.Name() != DefaultDriverName {
				t.Errorf("name %q, want %q", d.Name(), DefaultDriverName)
			}
		})
	}
}

func TestSocketPath(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		want     string // "" for an error
	}{
		{endpoint: "unix:///csi/csi.sock", want: "/csi/csi.sock"},
		{endpoint: "unix:/csi/csi.sock", want: "/csi/csi.sock"},
		{endpoint: "/csi//csi.sock", want: "/csi/csi.sock"},
		{endpoint: "unix://csi.sock"},
		{endpoint: "csi.sock"},
		{endpoint: "tcp://127.0.0.1:10000"},
		{endpoint: ""},
	} {
		got, err := SocketPath(tc.endpoint)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("SocketPath(%q) = %q, %v; want %q", tc.endpoint, got, err, tc.want)
		}
	}
}

func TestListenUnix(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "sub", "csi.sock")

	// A stale socket (left by a process that died) is replaced.
	stale, err := net.Listen("unix", filepath.Join(dir, "stale.sock"))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	ln, err := ListenUnix(filepath.Join(dir, "stale.sock"))
	if err != nil {
		t.Fatalf("listen over a stale socket: %v", err)
	}
	ln.Close()

	// The directory is made; a second listener replaces the first one's socket file.
	ln, err = ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := RemoveSocket(socket); err != nil {
		t.Errorf("RemoveSocket: %v", err)
	}
	if err := RemoveSocket(socket); err != nil {
		t.Errorf("RemoveSocket of nothing: %v", err)
	}

	// Anything but a socket is left alone.
	file := filepath.Join(dir, "file")
	writeFile(t, file, "keep me")
	if _, err := ListenUnix(file); err == nil {
		t.Error("ListenUnix over a regular file succeeded")
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
		t.Errorf("the regular file was touched: %q, %v", b, err)
	}
}
