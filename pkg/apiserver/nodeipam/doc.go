// Package nodeipam hands out pod CIDRs to nodes from the cluster CIDR, as kube-controller-manager's range
// allocator does (--allocate-node-cidrs with --cluster-cidr and --node-cidr-mask-size): each node without a
// spec.podCIDR gets the lowest free block of the node mask size; the blocks in use are read back from the
// nodes themselves, so a restarted server hands out nothing twice and a deleted node's block is free again.
package nodeipam
