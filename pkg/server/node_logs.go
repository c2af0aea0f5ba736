package server

import (
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodeagent/kubelet/pkg/debugpage"
)

// maxLinks bounds the symbolic links one /logs/ path may pass through.
const maxLinks = 16

// serveNodeLogs serves the node's log directory under /logs/, as upstream's kubelet does: a directory is
// listed, a file is sent. Symbolic links are followed only to places inside the directory (the links of
// /var/log/containers into /var/log/pods), so that nothing outside it can be read through them.
func (s *Server) serveNodeLogs(w http.ResponseWriter, r *http.Request) {
	root := filepath.Clean(s.cfg.Status.NodeLogsDir)
	rel := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, "/logs")), "/")
	real, err := resolveBeneath(root, rel)
	if err != nil {
		writeError(w, err)
		return
	}
	f, err := openBeneath(root, real)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case fi.IsDir():
		if !strings.HasSuffix(r.URL.Path, "/") {
			http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
			return
		}
		listDir(w, f)
	case fi.Mode().IsRegular():
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
	default:
		http.Error(w, "not a file or directory", http.StatusForbidden)
	}
}

// resolveBeneath returns rel with every symbolic link on its way resolved, relative to root; a link that leads
// out of root is refused.
func resolveBeneath(root, rel string) (string, error) {
	parts := strings.Split(rel, "/")
	var done []string
	links := 0
	for len(parts) > 0 {
		p := parts[0]
		parts = parts[1:]
		switch p {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", errorf(http.StatusForbidden, "path leaves the log directory")
			}
			done = done[:len(done)-1]
			continue
		}
		cur := filepath.Join(append([]string{root}, append(done, p)...)...)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", notFound(err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = append(done, p)
			continue
		}
		if links++; links > maxLinks {
			return "", errorf(http.StatusForbidden, "too many symbolic links")
		}
		target, err := os.Readlink(cur)
		if err != nil {
			return "", notFound(err)
		}
		if filepath.IsAbs(target) {
			inside, err := filepath.Rel(root, filepath.Clean(target))
			if err != nil || inside == ".." || strings.HasPrefix(inside, "../") {
				return "", errorf(http.StatusForbidden, "link leads out of the log directory")
			}
			done = nil
			target = inside
		}
		parts = append(strings.Split(target, "/"), parts...)
	}
	return filepath.Join(done...), nil
}

// openBeneath opens rel below root without following any symbolic link (resolveBeneath has resolved them),
// so that a link put in place meanwhile is refused rather than followed.
func openBeneath(root, rel string) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			return nil, errorf(http.StatusForbidden, "path changed while it was opened")
		}
		return nil, notFound(err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}

func notFound(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return errorf(http.StatusNotFound, "not found")
	}
	if errors.Is(err, os.ErrPermission) {
		return errorf(http.StatusForbidden, "permission denied")
	}
	return err
}

// listDir writes a directory's entries as links, as Go's file server lists them. Each link is relative,
// "./" and the escaped name, so that no file name (javascript:alert(1), //host/x) makes a link of another
// scheme or host; the page carries the debug page's Content-Security-Policy.
func listDir(w http.ResponseWriter, f *os.File) {
	names, err := f.Readdirnames(-1)
	if err != nil && !errors.Is(err, io.EOF) {
		writeError(w, err)
		return
	}
	sort.Strings(names)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", debugpage.ContentSecurityPolicy)
	var b strings.Builder
	b.WriteString("<!doctype html>\n<meta name=\"viewport\" content=\"width=device-width\">\n<pre>\n")
	for _, n := range names {
		dir := false
		if fi, err := os.Lstat(filepath.Join(f.Name(), n)); err == nil && fi.IsDir() {
			dir = true
		}
		b.WriteString(listEntry(n, dir))
	}
	b.WriteString("</pre>\n")
	_, _ = io.WriteString(w, b.String())
}

// listEntry is one line of a directory listing: a link to name, a directory's with a trailing slash.
func listEntry(name string, dir bool) string {
	href := "./" + url.PathEscape(name)
	if dir {
		href, name = href+"/", name+"/"
	}
	return fmt.Sprintf("<a href=\"%s\">%s</a>\n", html.EscapeString(href), html.EscapeString(name))
}
