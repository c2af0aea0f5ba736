// Package remote connects the kubelet to a CRI runtime over gRPC (containerd's CRI plugin, CRI-O, or another
// node agent's CRI socket), behind the same k8s.io/cri-api interfaces as the built-in runtime.
//
// It only dials; it owns no state and makes no decision.
package remote
