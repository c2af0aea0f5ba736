package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// NodeLeaseNamespace holds the nodes' heartbeat Leases.
const NodeLeaseNamespace = "kube-node-lease"

// MirrorPodAnnotation marks a pod the kubelet created for a static pod.
const MirrorPodAnnotation = "kubernetes.io/config.mirror"

// PodIndex gives the pods bound to a node; the objects are read-only.
type PodIndex interface {
	PodsOnNode(node string) []*corev1.Pod
}

// ErrForbidden is wrapped by every authorization and admission refusal.
var ErrForbidden = errors.New("forbidden")

// Authorizer decides what a user may do: members of system:masters anything,
// nodes what upstream's Node authorizer and system:node role allow, others
// only discovery. It is safe for concurrent use.
type Authorizer struct {
	pods PodIndex
}

// NewAuthorizer returns an Authorizer that looks pods up in pods.
func NewAuthorizer(pods PodIndex) *Authorizer { return &Authorizer{pods: pods} }

// NodeName returns the node a user acts for, if it is a node identity.
func NodeName(u *request.User) (string, bool) {
	name, ok := strings.CutPrefix(u.Name, NodeUserPrefix)
	if !ok || name == "" || !u.InGroup(GroupNodes) {
		return "", false
	}
	return name, true
}

// Authorize returns nil when u may make the request, else an error wrapping
// ErrForbidden. info carries the attributes upstream's authorizers see: the
// object name and selectors as request.Parse records them.
func (a *Authorizer) Authorize(u *request.User, info *request.Info) error {
	if u.InGroup(GroupMasters) {
		return nil
	}
	if !info.IsResource {
		return nil // discovery, version, health and OpenAPI are open to every authenticated user
	}
	if reviewAllowed(u, info) {
		return nil
	}
	node, ok := NodeName(u)
	if !ok {
		return fmt.Errorf("%w: user %q cannot %s resource %q", ErrForbidden, u.Name, info.Verb, info.Resource)
	}
	if a.nodeMay(node, info) {
		return nil
	}
	what := info.Resource
	if info.Subresource != "" {
		what += "/" + info.Subresource
	}
	return fmt.Errorf("%w: node %q cannot %s %s %q in namespace %q", ErrForbidden, node, info.Verb, what, info.ObjectName, info.Namespace)
}

// reviewAllowed reports whether u may create the access review info names: every authenticated user its
// own (selfsubjectaccessreviews, as upstream's system:basic-user role), nodes TokenReviews and
// SubjectAccessReviews (as upstream's system:node rules).
func reviewAllowed(u *request.User, info *request.Info) bool {
	if info.Verb != "create" || info.Subresource != "" {
		return false
	}
	switch info.Group + "/" + info.Resource {
	case "authorization.k8s.io/selfsubjectaccessreviews":
		return true
	case "authentication.k8s.io/tokenreviews", "authorization.k8s.io/subjectaccessreviews",
		"authorization.k8s.io/localsubjectaccessreviews":
		_, node := NodeName(u)
		return node
	}
	return false
}

func isRead(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }

// nodeMay reports whether node may make the request, as upstream's Node authorizer with the system:node
// rules decides (AuthorizeNodeWithSelectors on, its default since 1.32).
func (a *Authorizer) nodeMay(node string, info *request.Info) bool {
	name := info.ObjectName
	switch info.Group + "/" + info.Resource {
	case "/nodes":
		// A node reads only its own Node (by name, or listed with a metadata.name selector) and never deletes it.
		switch info.Subresource {
		case "":
			return info.Verb == "create" || isRead(info.Verb) && name == node ||
				name == node && (info.Verb == "update" || info.Verb == "patch")
		case "status":
			return name == node && (info.Verb == "get" || info.Verb == "update" || info.Verb == "patch")
		}
	case "/pods":
		// A node reads only the pods bound to it: by name, or listed with its spec.nodeName selector.
		switch info.Subresource {
		case "":
			switch info.Verb {
			case "create", "delete":
				return true // NodeRestriction limits both to the node's own (mirror) pods
			case "list", "watch":
				if selectsNode(info.FieldSelector, node) {
					return true
				}
				fallthrough
			case "get":
				return name != "" && a.boundTo(node, info.Namespace, name)
			}
		case "status":
			return info.Verb == "update" || info.Verb == "patch"
		case "eviction":
			return info.Verb == "create"
		}
	case "/events", "events.k8s.io/events":
		return info.Subresource == "" && (info.Verb == "create" || info.Verb == "update" || info.Verb == "patch")
	case "coordination.k8s.io/leases":
		if info.Subresource != "" || info.Namespace != NodeLeaseNamespace {
			return false
		}
		return info.Verb == "create" ||
			name == node && (info.Verb == "get" || info.Verb == "update" || info.Verb == "patch" || info.Verb == "delete")
	case "/secrets", "/configmaps":
		if info.Subresource != "" || !isRead(info.Verb) || info.Namespace == "" || name == "" {
			return false
		}
		return a.referenced(node, info.Resource, info.Namespace, name)
	case "/serviceaccounts":
		if info.Subresource != "" || info.Verb != "get" || info.Namespace == "" || name == "" {
			return false
		}
		return a.referenced(node, info.Resource, info.Namespace, name)
	}
	return false
}

// selectsNode reports whether a field selector has the requirement spec.nodeName=<node>.
func selectsNode(selector, node string) bool {
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return false
	}
	for _, r := range sel.Requirements() {
		if r.Field == "spec.nodeName" && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) && r.Value == node {
			return true
		}
	}
	return false
}

// boundTo reports whether the named pod is bound to node.
func (a *Authorizer) boundTo(node, namespace, name string) bool {
	for _, pod := range a.pods.PodsOnNode(node) {
		if pod.Namespace == namespace && pod.Name == name {
			return true
		}
	}
	return false
}

// referenced reports whether a pod bound to node uses the named object.
func (a *Authorizer) referenced(node, resource, namespace, name string) bool {
	for _, pod := range a.pods.PodsOnNode(node) {
		if pod.Namespace != namespace {
			continue
		}
		var refs []string
		switch resource {
		case "secrets":
			refs = references(pod).secrets
		case "configmaps":
			refs = references(pod).configMaps
		case "serviceaccounts":
			refs = []string{pod.Spec.ServiceAccountName}
		}
		for _, r := range refs {
			if r == name {
				return true
			}
		}
	}
	return false
}

// podRefs are the names of the secrets and configmaps a pod refers to.
type podRefs struct{ secrets, configMaps []string }

// references walks pod once for the secrets and configmaps it refers to: image pull secrets, volumes
// (projected ones too), and the envFrom and env valueFrom of every container.
func references(pod *corev1.Pod) podRefs {
	var r podRefs
	for _, s := range pod.Spec.ImagePullSecrets {
		r.secrets = append(r.secrets, s.Name)
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			r.secrets = append(r.secrets, v.Secret.SecretName)
		case v.ConfigMap != nil:
			r.configMaps = append(r.configMaps, v.ConfigMap.Name)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					r.secrets = append(r.secrets, src.Secret.Name)
				}
				if src.ConfigMap != nil {
					r.configMaps = append(r.configMaps, src.ConfigMap.Name)
				}
			}
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					r.secrets = append(r.secrets, e.SecretRef.Name)
				}
				if e.ConfigMapRef != nil {
					r.configMaps = append(r.configMaps, e.ConfigMapRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					r.secrets = append(r.secrets, e.ValueFrom.SecretKeyRef.Name)
				}
				if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
					r.configMaps = append(r.configMaps, e.ValueFrom.ConfigMapKeyRef.Name)
				}
			}
		}
	}
	return r
}

// NodeRestriction is the admission half of node limits: it checks the
// objects a node writes, as upstream's NodeRestriction plugin does.
type NodeRestriction struct{}

var _ rest.Admitter = NodeRestriction{}

// Admit implements rest.Admitter.
func (NodeRestriction) Admit(_ context.Context, a *rest.Attributes) error {
	if a.User == nil || a.User.InGroup(GroupMasters) {
		return nil
	}
	node, ok := NodeName(a.User)
	if !ok {
		return nil
	}
	deny := func(format string, args ...any) error {
		return apierrors.NewForbidden(a.Resource.GroupResource(), nameOf(a.Object, a.Old),
			fmt.Errorf("node %q %s", node, fmt.Sprintf(format, args...)))
	}
	switch a.Resource.Group + "/" + a.Resource.Name {
	case "/pods":
		if a.Old == nil {
			pod := a.Object.(*corev1.Pod)
			if _, mirror := pod.Annotations[MirrorPodAnnotation]; !mirror {
				return deny("can only create mirror pods")
			}
			if pod.Spec.NodeName != node {
				return deny("can only create pods with spec.nodeName set to itself")
			}
			if !ownedByNode(pod, node) {
				return deny("can only create pods with a single controller owner reference set to itself")
			}
			if pod.Spec.ServiceAccountName != "" {
				return deny("cannot create pods that reference service accounts")
			}
			if r := references(pod); len(r.secrets)+len(r.configMaps) > 0 {
				return deny("cannot create pods that reference secrets or configmaps")
			}
			return nil
		}
		if old := a.Old.(*corev1.Pod); old.Spec.NodeName != node {
			return deny("can only modify or delete pods bound to itself")
		}
	case "/nodes":
		if nameOf(a.Object, a.Old) != node {
			return deny("can only modify its own node object")
		}
	case "coordination.k8s.io/leases":
		if nameOf(a.Object, a.Old) != node {
			return deny("can only modify its own lease")
		}
	}
	return nil
}

// ownedByNode reports whether a mirror pod has the one owner reference upstream requires: the v1 Node
// node, as controller, without blockOwnerDeletion. (Upstream also checks the owner's UID against the Node.)
func ownedByNode(pod *corev1.Pod, node string) bool {
	if len(pod.OwnerReferences) != 1 {
		return false
	}
	o := pod.OwnerReferences[0]
	return o.APIVersion == "v1" && o.Kind == "Node" && o.Name == node && o.Controller != nil && *o.Controller &&
		(o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion)
}

func nameOf(obj, old runtime.Object) string {
	o := obj
	if o == nil {
		o = old
	}
	acc, err := meta.Accessor(o)
	if err != nil {
		return ""
	}
	return acc.GetName()
}
