package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"sort"
	"strings"
)

// DefaultPath is the PATH the preset images set.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

const busyboxPasswd = `root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
user:x:1000:1000:user:/home/user:/bin/sh
`

const busyboxGroup = `root:x:0:
user:x:1000:
nogroup:x:65534:
`

// BusyboxApplets runs `binary --list` and returns the applet names it
// prints, sorted, without "busybox" itself.
func BusyboxApplets(ctx context.Context, binary string) ([]string, error) {
	out, err := exec.CommandContext(ctx, binary, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets of %s: %w", binary, err)
	}
	var applets []string
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		name := strings.TrimSpace(line)
		if name == "" || name == "busybox" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			continue
		}
		applets = append(applets, name)
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("busybox %s lists no applets", binary)
	}
	sort.Strings(applets)
	return applets, nil
}

// Busybox describes a busybox image: the static binary at /bin/busybox, one
// symlink per applet in /bin, /etc/passwd and /etc/group with root, nobody
// (65534) and user (1000), a sticky /tmp, and `sh` as the command.
func Busybox(binary string, applets []string) Spec {
	s := Spec{
		Files: []File{
			{Path: "/bin/busybox", Source: binary, Mode: 0o755},
			{Path: "/etc/passwd", Data: []byte(busyboxPasswd), Mode: 0o644},
			{Path: "/etc/group", Data: []byte(busyboxGroup), Mode: 0o644},
		},
		Dirs: []Dir{
			{Path: "/tmp", Mode: 0o777 | fs.ModeSticky},
			{Path: "/root", Mode: 0o700},
			{Path: "/home/user", Mode: 0o755, UID: 1000, GID: 1000},
			{Path: "/var"},
		},
		Config: Config{
			Cmd: []string{"sh"},
			Env: []string{DefaultPath},
		},
	}
	for _, a := range applets {
		s.Symlinks = append(s.Symlinks, Symlink{Path: "/bin/" + a, Target: "busybox"})
	}
	return s
}

// Pause describes the pod sandbox image: the static pause binary at /pause
// as the entrypoint, and the /proc and /dev mount points of its container,
// so that every sandbox can run from one read-only copy of the image.
func Pause(binary string) Spec {
	return Spec{
		Files:  []File{{Path: "/pause", Source: binary, Mode: 0o755}},
		Dirs:   []Dir{{Path: "/proc"}, {Path: "/dev"}},
		Config: Config{Entrypoint: []string{"/pause"}, Env: []string{DefaultPath}},
	}
}
