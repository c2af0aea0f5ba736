package auth

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
)

// NodeLeaseNamespace holds the nodes' heartbeat Leases.
const NodeLeaseNamespace = "kube-node-lease"

// MirrorPodAnnotation marks a pod the kubelet created for a static pod.
const MirrorPodAnnotation = "kubernetes.io/config.mirror"

// PodIndex gives the pods bound to a node; the objects are read-only.
type PodIndex interface {
	PodsOnNode(node string) []*corev1.Pod
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
