// Package allocation keeps what the kubelet has given each pod's containers, as upstream's allocation manager
// does for in-place resize (`pods/resize`): the resources allocated to each container (its spec at
// admission, then each resize the kubelet accepted) and the resources actuated (applied to the container that
// runs). Both live in a checkpoint file under the kubelet's root directory, so that a restarted kubelet knows
// what its running containers were given and which resize is still to be applied.
//
// The decisions are pure functions: whether a resize fits the node (Decide), and what a pod looks like with
// its allocated resources (WithAllocated).
package allocation
