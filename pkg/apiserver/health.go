package apiserver

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
)

// healthCheck is one named check behind /healthz, /livez and /readyz.
type healthCheck struct {
	name  string
	check func() error
}

// healthChecks are the server's checks: ping (it answers) and storage (its
// last commit to disk succeeded).
func (s *Server) healthChecks() []healthCheck {
	return []healthCheck{
		{"ping", func() error { return nil }},
		{"storage", s.store.Health},
	}
}

// isHealthPath reports whether p is a health endpoint or one of its checks
// (/readyz, /readyz/storage).
func isHealthPath(p string) bool {
	for _, root := range []string{"/healthz", "/livez", "/readyz"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return true
		}
	}
	return false
}

// isPublicPath reports whether r may be served without credentials: a read
// of the health endpoints (not their individual checks) or the version.
func isPublicPath(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && auth.PublicPath(r.URL.Path)
}

// serveHealth answers a health endpoint in kube-apiserver's format: "ok", or
// with ?verbose one "[+]name ok" line per check; on a failure always the
// verbose list, the failing checks as "[-]name failed: reason" ("reason
// withheld" unless reasons is set, as kube-apiserver answers anonymous
// callers), and a 500. ?exclude=name skips a check; /<endpoint>/<name> runs
// one check alone.
func serveHealth(w http.ResponseWriter, r *http.Request, checks []healthCheck, reasons bool) {
	root, only, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if only != "" {
		for _, c := range checks {
			if c.name == only {
				if err := c.check(); err != nil {
					http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
					return
				}
				_, _ = w.Write([]byte("ok"))
				return
			}
		}
		http.NotFound(w, r)
		return
	}
	excluded := map[string]bool{}
	for _, e := range r.URL.Query()["exclude"] {
		excluded[e] = true
	}
	var out bytes.Buffer
	failed := false
	for _, c := range checks {
		switch err := c.check(); {
		case excluded[c.name]:
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
		case err != nil && !reasons:
			failed = true
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
		case err != nil:
			failed = true
			fmt.Fprintf(&out, "[-]%s failed: %v\n", c.name, err)
		default:
			fmt.Fprintf(&out, "[+]%s ok\n", c.name)
		}
	}
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(&out, "%s check failed\n", root)
		_, _ = out.WriteTo(w)
		return
	}
	if _, verbose := r.URL.Query()["verbose"]; !verbose {
		_, _ = w.Write([]byte("ok"))
		return
	}
	fmt.Fprintf(&out, "%s check passed\n", root)
	_, _ = out.WriteTo(w)
}
