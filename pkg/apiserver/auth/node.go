package auth

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// NodeLeaseNamespace holds the nodes' heartbeat Leases.
const NodeLeaseNamespace = "kube-node-lease"

// PodIndex gives the pods bound to a node; the objects are read-only.
type PodIndex interface {
	PodsOnNode(node string) []*corev1.Pod
}

// VolumeIndex gives PersistentVolumes by name; a PodIndex that also
// implements it lets nodes read the volumes their pods' claims are bound to.
type VolumeIndex interface {
	PersistentVolume(name string) (*corev1.PersistentVolume, bool)
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
	case "/services":
		// Every node reads all Services: pods' service environment variables (upstream's system:node rules).
		return info.Subresource == "" && isRead(info.Verb)
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
		// A node reads the service accounts of its pods, and asks for their tokens (NodeRestriction then
		// requires the token to be bound to one of its pods).
		get := info.Subresource == "" && info.Verb == "get"
		token := info.Subresource == "token" && info.Verb == "create"
		if !get && !token || info.Namespace == "" || name == "" {
			return false
		}
		return a.referenced(node, info.Resource, info.Namespace, name)
	case "/persistentvolumeclaims":
		// A node gets the claims its pods use, and updates their status.
		ok := info.Subresource == "" && info.Verb == "get" ||
			info.Subresource == "status" && (info.Verb == "update" || info.Verb == "patch")
		if !ok || info.Namespace == "" || name == "" {
			return false
		}
		return a.referenced(node, info.Resource, info.Namespace, name)
	case "/persistentvolumes":
		// A node gets the volumes bound (by their claimRef) to the claims its pods use.
		if info.Subresource != "" || info.Verb != "get" || name == "" {
			return false
		}
		vols, ok := a.pods.(VolumeIndex)
		if !ok {
			return false
		}
		pv, found := vols.PersistentVolume(name)
		if !found || pv.Spec.ClaimRef == nil {
			return false
		}
		return a.referenced(node, "persistentvolumeclaims", pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name)
	case "storage.k8s.io/csidrivers", "storage.k8s.io/csinodes", "storage.k8s.io/volumeattachments":
		return a.nodeMayStorage(node, info)
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

// referenced reports whether a pod bound to node uses the named object. A
// mirror pod grants its node nothing, as in upstream's Node authorizer.
func (a *Authorizer) referenced(node, resource, namespace, name string) bool {
	for _, pod := range a.pods.PodsOnNode(node) {
		if pod.Namespace != namespace {
			continue
		}
		if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		var refs []string
		switch resource {
		case "secrets":
			refs = podfacts.References(pod).Secrets
		case "configmaps":
			refs = podfacts.References(pod).ConfigMaps
		case "persistentvolumeclaims":
			refs = podfacts.References(pod).Claims
		case "serviceaccounts":
			refs = []string{pod.Spec.ServiceAccountName}
		case "resourceclaims":
			refs = claimNames(pod)
		}
		for _, r := range refs {
			if r != "" && r == name {
				return true
			}
		}
	}
	return false
}
