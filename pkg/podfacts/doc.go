// Package podfacts is the one home of facts about a pod that several parts of the node agent need and must
// agree on: quantities read without overflow, the values the downward API exposes (env and volumes), a
// pod's summed requests and limits (sidecars, pod-level resources and overhead included, as upstream's
// component-helpers PodRequests and PodLimits sum them) for admission, the cgroups, eviction and the sizing
// of memory-backed volumes, whether an init container is a sidecar, and, as they move here, the QoS class, OOM score adjustment, CPU shares and quota, the static and mirror pod
// annotations, the CRI label names, and whether a pod fits a node.
//
// It is a leaf: it imports only the API types, and holds pure functions without I/O, clocks or state.
package podfacts
