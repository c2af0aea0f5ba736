// Package placement decides which node an unbound pod fits on: a small fit
// check (node Ready and schedulable, node selector, required node affinity
// terms by label, taints and tolerations, allocatable cpu, memory and pod
// count) and upstream's LeastAllocated score among the nodes that fit, so that
// pods spread across nodes by free allocatable; not a scheduler framework.
// A pod's ResourceClaims are allocated on a node with upstream's structured
// allocator (dra.go). Its functions are pure, but for the allocator's
// process-wide cache of compiled CEL selectors.
package placement
