package auth

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

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
		obj, _ := a.Object.(*corev1.Node)
		old, _ := a.Old.(*corev1.Node)
		if err := AdmitOwnNode(node, obj, old); err != nil {
			return apierrors.NewForbidden(a.Resource.GroupResource(), node, err)
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
