// Package csi is the kubelet's registry of CSI node plugins, as upstream's pkg/volume/csi keeps it: a
// driver registers through the plugin watcher (type CSIPlugin, usually by node-driver-registrar), the
// registry checks its name, versions and endpoint, asks the driver NodeGetInfo and NodeGetCapabilities, and
// records it in the API as upstream does (the node's CSINode object, with the driver's node ID, volume limit
// and topology keys; the csi.volume.kubernetes.io/nodeid annotation and topology labels on the Node). A
// driver whose socket goes away is removed from both.
//
// The volume manager (package volume) finds a registered driver's node service here by name to stage,
// publish, unpublish and unstage volumes.
package csi
