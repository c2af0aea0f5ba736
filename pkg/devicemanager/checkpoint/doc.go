// Package checkpoint reads and writes the device manager's checkpoint, <root-dir>/device-plugins/
// kubelet_internal_checkpoint, in upstream's format: JSON of the devices each container was allocated (with
// the plugin's Allocate answer) and the devices each resource had, with upstream's checksum. The type names
// are upstream's, because the checksum hashes a printout of them; a checkpoint written by either kubelet
// is read by the other.
package checkpoint
