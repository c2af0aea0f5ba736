package discovery

import (
	"net/http"
	"runtime"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/nodeagent/kubelet/internal/httpjson"
	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

// GitVersion is the Kubernetes version the API corresponds to.
const GitVersion = "v1.35.4"

// Handler serves discovery. It is safe for concurrent use.
type Handler struct {
	reg   *registry.Registry
	extra []*metav1.APIResourceList // groups served outside the registry (metrics.k8s.io)
}

// New returns a discovery Handler for reg and the groups of extra.
func New(reg *registry.Registry, extra ...*metav1.APIResourceList) *Handler {
	return &Handler{reg: reg, extra: extra}
}

// Serves reports whether path is a discovery document this handler serves.
func (h *Handler) Serves(path string) bool {
	p := strings.Trim(path, "/")
	parts := strings.Split(p, "/")
	switch {
	case p == "version", p == "api", p == "apis", p == "api/v1":
		return true
	case parts[0] == "apis" && (len(parts) == 2 || len(parts) == 3):
		return true
	}
	return false
}

// ServeHTTP serves the document at r's path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.Trim(r.URL.Path, "/")
	parts := strings.Split(p, "/")
	switch {
	case p == "version":
		write(w, version.Info{Major: "1", Minor: "35", GitVersion: GitVersion, GoVersion: runtime.Version(),
			Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH})
	case p == "api":
		write(w, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
	case p == "api/v1":
		write(w, h.resourceList("", "v1"))
	case p == "apis":
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, g := range h.groups() {
			list.Groups = append(list.Groups, *g)
		}
		write(w, list)
	case len(parts) == 2:
		for _, g := range h.groups() {
			if g.Name == parts[1] {
				g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				write(w, g)
				return
			}
		}
		http.NotFound(w, r)
	case len(parts) == 3:
		if l := h.resourceList(parts[1], parts[2]); len(l.APIResources) > 0 {
			write(w, l)
			return
		}
		http.NotFound(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (h *Handler) groups() []*metav1.APIGroup {
	var out []*metav1.APIGroup
	for _, gv := range h.reg.GroupVersions() {
		if gv.Group == "" {
			continue
		}
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		out = append(out, &metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
	}
	for _, l := range h.extra {
		group, ver, _ := strings.Cut(l.GroupVersion, "/")
		v := metav1.GroupVersionForDiscovery{GroupVersion: l.GroupVersion, Version: ver}
		out = append(out, &metav1.APIGroup{Name: group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
	}
	return out
}

func (h *Handler) resourceList(group, ver string) *metav1.APIResourceList {
	gv := ver
	if group != "" {
		gv = group + "/" + ver
	}
	for _, l := range h.extra {
		if l.GroupVersion == gv {
			return l
		}
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
	for _, r := range h.reg.All() {
		if r.Group != group || r.Version != ver {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.Name, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind,
			Verbs: r.Verbs(), ShortNames: r.ShortNames, Categories: r.Categories,
		})
		for _, sub := range r.Subresources {
			verbs := []string{"get", "patch", "update"}
			kind, group, version := r.Kind, "", ""
			switch sub {
			case "token":
				verbs, kind, group, version = []string{"create"}, "TokenRequest", "authentication.k8s.io", "v1"
			case "binding":
				verbs, kind = []string{"create"}, "Binding"
			case "eviction":
				verbs, kind = []string{"create"}, "Eviction"
			case "log":
				verbs, kind = []string{"get"}, "Pod"
			case "exec", "attach", "portforward":
				verbs, kind = []string{"create", "get"}, "PodExecOptions"
			case "proxy":
				verbs, kind = []string{"create", "delete", "get", "patch", "update"}, "NodeProxyOptions"
			case "finalize":
				verbs = []string{"update"}
			}
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: r.Name + "/" + sub, Namespaced: r.Namespaced, Group: group, Version: version, Kind: kind, Verbs: verbs})
		}
	}
	return list
}

func write(w http.ResponseWriter, v any) { httpjson.Write(w, v) }
