// Package csinames holds the names upstream gives CSI volumes, which the kubelet and the API server's
// attach/detach controller must compute alike: the VolumeAttachment of a volume to a node, and a volume's
// unique name in a Node's status.volumesInUse. It has no dependencies.
package csinames

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// PluginName is the plugin part of a CSI volume's unique name, upstream's csi.CSIPluginName.
const PluginName = "kubernetes.io/csi"

// AttachmentName is the name of the VolumeAttachment of a volume to a node, as upstream's csi attacher
// makes it: "csi-" and the hex SHA-256 of the volume handle, driver and node name, concatenated.
func AttachmentName(handle, driver, node string) string {
	sum := sha256.Sum256([]byte(handle + driver + node))
	return "csi-" + hex.EncodeToString(sum[:])
}

// UniqueVolumeName is a CSI volume's name in status.volumesInUse: kubernetes.io/csi/<driver>^<handle>.
func UniqueVolumeName(driver, handle string) string {
	return PluginName + "/" + driver + "^" + handle
}

// ParseUniqueVolumeName splits a unique name of a CSI volume into its driver and handle.
func ParseUniqueVolumeName(name string) (driver, handle string, ok bool) {
	rest, ok := strings.CutPrefix(name, PluginName+"/")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "^")
}
