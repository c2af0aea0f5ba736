package ociimage

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Spec describes the contents and the runtime config of a one-layer image.
// Parent directories that are not listed are created with mode 0755, owned
// by root.
type Spec struct {
	Files    []File
	Dirs     []Dir
	Symlinks []Symlink
	Config   Config
	// OS and Architecture default to linux and the build host's GOARCH.
	OS           string
	Architecture string
}

// File is a regular file in the image. Its content is Data, or the content
// of the host file Source when Source is set.
type File struct {
	// Path inside the image, absolute or relative to the image root.
	Path   string
	Source string
	Data   []byte
	// Mode holds the permission bits; fs.ModeSetuid, fs.ModeSetgid and
	// fs.ModeSticky (or the raw 07000 bits) are honoured. Zero means the
	// source file's permissions, or 0644 for Data.
	Mode     fs.FileMode
	UID, GID int
}

// Dir is a directory in the image. Zero Mode means 0755.
type Dir struct {
	Path     string
	Mode     fs.FileMode
	UID, GID int
}

// Symlink is a symbolic link in the image pointing at Target, which is
// stored as given.
type Symlink struct {
	Path   string
	Target string
}

// Config is the part of the OCI image config a runtime reads.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
	Labels     map[string]string
}

// cleanPath turns an image path into the relative, clean form used in the
// layer tar, and rejects paths that leave the root or name it.
func cleanPath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	c := path.Clean("/" + p)
	if c == "/" {
		return "", fmt.Errorf("path %q names the image root", p)
	}
	if strings.Contains(p, "\x00") {
		return "", fmt.Errorf("path %q holds a NUL byte", p)
	}
	return strings.TrimPrefix(c, "/"), nil
}

// tarMode converts a Go file mode to the permission and special bits of a
// tar header.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m & 0o7777)
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
