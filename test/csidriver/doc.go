// Package csidriver is the project's own small CSI driver for the end-to-end tests: a hostpath driver that
// the tests run as a privileged pod on the node, as users run CSI node plugins, so that the kubelet's CSI
// support is exercised against a real plugin speaking CSI over a Unix socket.
//
// One process serves the Identity, Controller and Node services (spec v1.13) on one socket. Volumes live
// under a state directory:
//
//	<state-dir>/<volume-id>       a filesystem volume's data (a directory)
//	<state-dir>/<volume-id>.img   a block volume's data (a sparse file, attached to a loop device when staged)
//	<state-dir>/<volume-id>.json  the volume's record: capacity, access type, where it is staged and published
//
// so that a restarted driver finds its volumes, their capacity, their loop devices and their publications.
// A volume's ID is the name CreateVolume was given; a volume ID never created (static provisioning) gets its
// directory on its first NodeStageVolume, and an inline ephemeral volume gets a fresh directory on
// NodePublishVolume that NodeUnpublishVolume removes.
//
// The package also carries the node-driver-registrar's part (Registrar): the pluginregistration.k8s.io/v1
// Registration service the kubelet's plugin watcher finds in its plugins_registry directory.
//
// What it owns: the state directory, the mounts it makes at the staging and target paths the CO passes, and
// the loop devices backing its block volumes. What it must not do: touch a path outside the state directory
// for volume data (volume IDs are checked so that every data path is a direct child of it, and a symbolic
// link found there is refused), or unmount anything at a path the CO did not name for the volume.
//
// All calls on one volume are serialised by a per-volume lock; calls on different volumes run concurrently.
// The decisions (capacity, capabilities, idempotency of publish, health, usage) are pure functions in
// decide.go; the rest is the thin shell that mounts, attaches and records. Linux only.
package csidriver
