// Package specopts holds the OCI spec options that turn a CRI container or sandbox config into a runc
// spec: mounts with their propagation, devices, resources, capabilities, the pod's namespaces,
// supplementary groups by the supplementalGroupsPolicy (the image's /etc/group merged in, or not), sysctls,
// the pod's user namespace with its ID-mapped mounts, and the process arguments merged with the image's.
//
// They follow what containerd's CRI plugin does (its options are internal to containerd 2.x), so a pod
// gets the same spec from the built-in runtime as from containerd's CRI plugin. Where this runtime
// refuses what it cannot honour, it says so: a recursive read-only mount on a kernel without them, or a user
// namespace mode other than POD and NODE, is an error naming the mount or the mode.
package specopts
