package auth

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// SliceIndex gives ResourceSlices by name; a PodIndex that also implements
// it lets nodes get, update and delete their own slices by name.
type SliceIndex interface {
	ResourceSlice(name string) (*resourcev1.ResourceSlice, bool)
}

// Upstream's reasons for refusing a node's ResourceSlice request.
const (
	sliceSelectorReason    = "can only list/watch/deletecollection resourceslices with nodeName field selector"
	sliceSubresourceReason = "cannot authorize ResourceSlice subresources"
	sliceVerbReason        = "only the following verbs are allowed for a ResourceSlice: get, watch, list, create, update, patch, delete, deletecollection"
)

// nodeMayResource decides a node's resource.k8s.io request as upstream's
// Node authorizer (authorizeResourceSlice, AuthorizeNodeWithSelectors on):
// it gets the ResourceClaims its pods use; it creates slices (NodeRestriction
// checks their node), gets, updates, patches and deletes its own, and lists,
// watches and deletes collections only with the field selector
// spec.nodeName=<node>. DeviceClasses and templates are not a node's
// business. reason explains a refusal when upstream gives one.
func (a *Authorizer) nodeMayResource(node string, info *request.Info) (ok bool, reason string) {
	name := info.ObjectName
	switch info.Resource {
	case "resourceclaims":
		if info.Subresource != "" || info.Verb != "get" || info.Namespace == "" || name == "" {
			return false, ""
		}
		return a.referenced(node, info.Resource, info.Namespace, name), ""
	case "resourceslices":
		if info.Subresource != "" {
			return false, sliceSubresourceReason
		}
		switch info.Verb {
		case "create":
			return true, ""
		case "get", "update", "patch", "delete":
			idx, ok := a.pods.(SliceIndex)
			if !ok || name == "" {
				return false, ""
			}
			s, found := idx.ResourceSlice(name)
			return found && s.Spec.NodeName != nil && *s.Spec.NodeName == node, ""
		case "list", "watch", "deletecollection":
			if selectsSliceNode(info.FieldSelector, node) {
				return true, ""
			}
			return false, sliceSelectorReason
		default:
			return false, sliceVerbReason
		}
	}
	return false, ""
}

// selectsSliceNode reports whether a field selector has the requirement
// spec.nodeName=<node> (upstream accepts "=" only, which "==" parses to).
func selectsSliceNode(selector, node string) bool {
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return false
	}
	for _, r := range sel.Requirements() {
		if r.Field == resourcev1.ResourceSliceSelectorNodeName && r.Value == node &&
			(r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) {
			return true
		}
	}
	return false
}

// claimNames returns the names of the ResourceClaims pod uses, as
// upstream's graph records them: resourceClaimName, or the generated name
// from status.resourceClaimStatuses.
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for i := range pod.Spec.ResourceClaims {
		if n, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && n != nil {
			out = append(out, *n)
		}
	}
	return out
}

// admitResourceSlice is NodeRestriction for ResourceSlices: a node creates
// and deletes (one by one, or in a collection) only the slices of its own
// node. Other writes the authorizer has checked by name.
func admitResourceSlice(node string, a *rest.Attributes) error {
	var verb string
	var s *resourcev1.ResourceSlice
	switch {
	case a.Old == nil:
		verb, s = "create", asSlice(a.Object)
	case a.Object == nil:
		verb, s = "delete", asSlice(a.Old)
	default:
		return nil
	}
	if s == nil || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
		return apierrors.NewForbidden(a.Resource.GroupResource(), nameOf(a.Object, a.Old),
			fmt.Errorf("can only %s ResourceSlice with the same NodeName as the requesting node", verb))
	}
	return nil
}

func asSlice(obj any) *resourcev1.ResourceSlice {
	s, _ := obj.(*resourcev1.ResourceSlice)
	return s
}

// errClaimStatuses is upstream's refusal (its typo kept) of a node's change
// to a pod's status.resourceClaimStatuses, which the claim controller owns.
var errClaimStatuses = errors.New("cannot update resource claim statues")

// claimStatusesChanged reports whether a pod status update changes
// status.resourceClaimStatuses.
func claimStatusesChanged(old, cur *corev1.Pod) bool {
	if len(old.Status.ResourceClaimStatuses) == 0 && len(cur.Status.ResourceClaimStatuses) == 0 {
		return false
	}
	return !apiequality.Semantic.DeepEqual(old.Status.ResourceClaimStatuses, cur.Status.ResourceClaimStatuses)
}
