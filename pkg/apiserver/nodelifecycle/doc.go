// Package nodelifecycle decides what upstream's node lifecycle and taint eviction controllers decide, as
// pure functions the API server's control loop applies:
//
//   - a node whose kubelet has not renewed its Lease nor posted its status for the grace period has its
//     Ready and pressure conditions set to Unknown ("Kubelet stopped posting node status."), and its pods
//     are marked not Ready;
//   - a node whose Ready condition is Unknown carries the node.kubernetes.io/unreachable taints, one whose
//     Ready is False the node.kubernetes.io/not-ready taints (NoSchedule and NoExecute both), a Ready node
//     neither;
//   - when no node of any zone is Ready (master disruption), the NoExecute ones are removed and none added
//     until one is, and in a partially disrupted small zone none is added (disruption.go);
//   - a pod on a node with NoExecute taints is evicted (deleted, gracefully) at once if it tolerates none
//     of them, or when its shortest matching tolerationSeconds has passed since the taint was added; a
//     toleration without seconds keeps it forever.
//
// Heartbeats are timed by when this server saw them change, not by the kubelet's clock, as upstream does,
// so a node with a skewed clock is judged by the server's.
package nodelifecycle
