package auth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
)

// ErrForbidden is wrapped by every authorization and admission refusal.
var ErrForbidden = errors.New("forbidden")

// Authorizer decides what a user may do: members of system:masters anything,
// nodes what upstream's Node authorizer and system:node role allow, every
// authenticated user discovery and its own access reviews. It is safe for
// concurrent use.
type Authorizer struct {
	pods PodIndex
}

// NewAuthorizer returns an Authorizer that looks pods up in pods.
func NewAuthorizer(pods PodIndex) *Authorizer { return &Authorizer{pods: pods} }

// NodeName returns the node a user acts for, if it is a node identity
// (system:node:<name> in group system:nodes).
func NodeName(u *request.User) (string, bool) {
	name, ok := strings.CutPrefix(u.Name, NodeUserPrefix)
	if !ok || name == "" || !u.InGroup(GroupNodes) {
		return "", false
	}
	return name, true
}

// Decision is an authorization answer and why it was given.
type Decision struct {
	Allowed bool
	Reason  string
}

// Authorize returns nil when u may make the request, else an error wrapping
// ErrForbidden. info carries the attributes upstream's authorizers see: the
// object name and selectors as request.Parse records them.
func (a *Authorizer) Authorize(u *request.User, info *request.Info) error {
	if d := a.Decide(u, info); !d.Allowed {
		return fmt.Errorf("%w: %s", ErrForbidden, d.Reason)
	}
	return nil
}

// publicPaths may be read by anyone, as kube-apiserver's
// system:public-info-viewer role allows.
var publicPaths = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true, "/version": true, "/version/": true}

// PublicPath reports whether anyone may read the non-resource path p.
func PublicPath(p string) bool { return publicPaths[p] }

// Decide is the policy the server applies to its own requests: system:masters
// may do anything; anonymous callers only the health endpoints and the
// version; every authenticated user may read the non-resource paths
// (discovery, version, health, OpenAPI) and review its own access; nodes may
// create TokenReviews and SubjectAccessReviews and do what upstream's Node
// authorizer allows; everybody else nothing.
func (a *Authorizer) Decide(u *request.User, info *request.Info) Decision {
	if u.InGroup(GroupMasters) {
		return Decision{true, fmt.Sprintf("%q is a member of %s", u.Name, GroupMasters)}
	}
	if u.Name == AnonymousUser || u.InGroup(GroupUnauthenticated) {
		if !info.IsResource && info.Verb == "get" && publicPaths[info.Path] {
			return Decision{true, "the health endpoints and the version are public"}
		}
		return Decision{false, fmt.Sprintf("user %q cannot %s", u.Name, describe(info))}
	}
	if !info.IsResource {
		return Decision{true, "non-resource paths are open to every authenticated user"}
	}
	node, isNode := NodeName(u)
	if info.Verb == "create" && info.Subresource == "" {
		switch info.Group + "/" + info.Resource {
		case "authorization.k8s.io/selfsubjectaccessreviews", "authentication.k8s.io/selfsubjectreviews":
			return Decision{true, "every authenticated user may review itself"}
		case "authentication.k8s.io/tokenreviews", "authorization.k8s.io/subjectaccessreviews",
			"authorization.k8s.io/localsubjectaccessreviews":
			if isNode {
				return Decision{true, "nodes may create token and access reviews"}
			}
		}
	}
	if !isNode {
		return Decision{false, fmt.Sprintf("user %q cannot %s", u.Name, describe(info))}
	}
	ok, why := a.nodeMay(node, info), ""
	if info.Group == "resource.k8s.io" {
		ok, why = a.nodeMayResource(node, info)
	}
	if ok {
		return Decision{true, fmt.Sprintf("node %q may %s", node, describe(info))}
	}
	if why != "" {
		return Decision{false, fmt.Sprintf("node %q cannot %s: %s", node, describe(info), why)}
	}
	return Decision{false, fmt.Sprintf("node %q cannot %s", node, describe(info))}
}

// Review is the policy SubjectAccessReviews answer, as kubelets ask it about
// the requests to their endpoints: Decide's, and a node may do anything on
// its own Node (any subresource: proxy, stats, log, metrics...), which its
// kubelet serves.
func (a *Authorizer) Review(u *request.User, info *request.Info) Decision {
	if node, ok := NodeName(u); ok && info.IsResource && info.Group == "" && info.Resource == "nodes" {
		if info.ObjectName == node {
			return Decision{true, fmt.Sprintf("node %q may %s of its own node", node, info.Verb)}
		}
		if info.Subresource != "" {
			return Decision{false, fmt.Sprintf("node %q cannot %s: only its own node's", node, describe(info))}
		}
	}
	return a.Decide(u, info)
}

// describe words a request for a reason: `get pods "p" in namespace "ns"`.
func describe(info *request.Info) string {
	if !info.IsResource {
		return fmt.Sprintf("%s path %q", info.Verb, info.Path)
	}
	what := info.Resource
	if info.Group != "" {
		what += "." + info.Group
	}
	if info.Subresource != "" {
		what += "/" + info.Subresource
	}
	s := info.Verb + " " + what
	if info.ObjectName != "" {
		s += fmt.Sprintf(" %q", info.ObjectName)
	}
	if info.Namespace != "" {
		s += fmt.Sprintf(" in namespace %q", info.Namespace)
	}
	return s
}
