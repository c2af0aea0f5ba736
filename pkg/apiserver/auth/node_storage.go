package auth

import (
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
)

// AttachmentIndex gives VolumeAttachments by name; a PodIndex that also
// implements it lets nodes get the attachments of volumes to themselves.
type AttachmentIndex interface {
	VolumeAttachment(name string) (*storagev1.VolumeAttachment, bool)
}

// nodeMayStorage reports whether node may make a storage.k8s.io request, as
// upstream's Node authorizer and system:node rules decide: every node reads
// the CSIDrivers; a node keeps its own CSINode; it gets the
// VolumeAttachments to itself (its graph's edge from an attachment to its
// spec.nodeName) and never lists or watches them. StorageClasses and
// CSIStorageCapacities are not a node's business.
func (a *Authorizer) nodeMayStorage(node string, info *request.Info) bool {
	name := info.ObjectName
	if info.Subresource != "" {
		return false
	}
	switch info.Resource {
	case "csidrivers":
		return isRead(info.Verb)
	case "csinodes":
		// The name of a create is not known here: NodeRestriction checks it.
		switch info.Verb {
		case "create":
			return true
		case "get", "update", "patch", "delete":
			return name == node
		}
	case "volumeattachments":
		if info.Verb != "get" || name == "" {
			return false
		}
		idx, ok := a.pods.(AttachmentIndex)
		if !ok {
			return false
		}
		va, found := idx.VolumeAttachment(name)
		return found && va.Spec.NodeName == node
	}
	return false
}
