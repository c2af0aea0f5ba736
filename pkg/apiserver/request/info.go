package request

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"
)

// Info describes a resource request (IsResource) or a non-resource one such as
// /version or /api.
type Info struct {
	IsResource  bool
	Verb        string // get list watch create update patch delete deletecollection, or the lowercased method
	Group       string
	Version     string
	Namespace   string
	Resource    string
	Name        string
	Subresource string
	// SubPath is what follows the subresource (nodes/proxy/<SubPath>).
	SubPath string
	Path    string
	// ObjectName is the object the request names, as upstream's request info has it for authorization: the
	// path's name or, for a list or watch without one (and not by the /watch/ path prefix), the value of a
	// metadata.name=<name> field selector that is a valid path segment.
	ObjectName string
	// FieldSelector and LabelSelector are the raw selectors of a list, watch or deletecollection, recorded
	// for authorization as upstream records them: not for requests by the deprecated /watch/ path prefix,
	// whose selectors upstream's authorizers never see.
	FieldSelector, LabelSelector string
}

// Parse returns the Info of r.
func Parse(r *http.Request) Info {
	info := Info{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		info.Version, parts = parts[1], parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		info.Group, info.Version, parts = parts[1], parts[2], parts[3:]
	default:
		return info
	}
	if len(parts) == 0 {
		return info
	}
	info.IsResource = true
	watchPath := false
	if parts[0] == "watch" {
		watchPath, parts = true, parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 || isNamespaceSub(parts[2]) {
			// A namespace object, or its own subresource.
			info.Resource, info.Name = "namespaces", parts[1]
			if len(parts) > 2 {
				info.Subresource = parts[2]
			}
		} else {
			info.Namespace, parts = parts[1], parts[2:]
			fillResource(&info, parts)
		}
		if info.Resource == "namespaces" {
			info.Namespace = info.Name
		}
	} else {
		fillResource(&info, parts)
	}
	info.Verb = verbOf(r, info, watchPath)
	info.ObjectName = info.Name
	if watchPath {
		return info
	}
	q := r.URL.Query()
	switch info.Verb {
	case "list", "watch", "deletecollection":
		info.FieldSelector, info.LabelSelector = q.Get("fieldSelector"), q.Get("labelSelector")
	}
	if info.Name == "" && (info.Verb == "list" || info.Verb == "watch") {
		info.ObjectName = selectedName(info.FieldSelector)
	}
	return info
}

// selectedName returns the name a field selector requires (metadata.name=<name>) when it is a valid path
// segment, else "".
func selectedName(selector string) string {
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return ""
	}
	name, ok := sel.RequiresExactMatch("metadata.name")
	if !ok || len(path.IsValidPathSegmentName(name)) > 0 {
		return ""
	}
	return name
}

func isNamespaceSub(s string) bool { return s == "status" || s == "finalize" }

func fillResource(info *Info, parts []string) {
	if len(parts) > 0 {
		info.Resource = parts[0]
	}
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = parts[2]
	}
	if len(parts) > 3 {
		info.SubPath = strings.Join(parts[3:], "/")
	}
}

func verbOf(r *http.Request, info Info, watchPath bool) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if watchPath || isTrue(r.URL.Query().Get("watch")) {
			return "watch"
		}
		if info.Name == "" {
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if info.Name == "" {
			return "deletecollection"
		}
		return "delete"
	}
	return strings.ToLower(r.Method)
}

func isTrue(s string) bool { return s == "true" || s == "1" }

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// User is an authenticated identity. Extra carries what the authenticator
// adds beyond name, UID and groups (a service account token's pod and node,
// keyed as kube-apiserver keys them).
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// InGroup reports whether u belongs to group g.
func (u *User) InGroup(g string) bool {
	for _, x := range u.Groups {
		if x == g {
			return true
		}
	}
	return false
}

type userKey struct{}
type infoKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user in ctx, or nil.
func UserFrom(ctx context.Context) *User {
	u, _ := ctx.Value(userKey{}).(*User)
	return u
}

// WithInfo returns ctx carrying info.
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoFrom returns the request info in ctx, or nil.
func InfoFrom(ctx context.Context) *Info {
	i, _ := ctx.Value(infoKey{}).(*Info)
	return i
}
