// Package podresources serves the kubelet's pod-resources API (podresources/v1) on
// <root-dir>/pod-resources/kubelet.sock, as upstream's kubelet does for monitoring agents (DCGM exporter,
// topology-aware schedulers): List and Get name, for each active pod's containers, the devices device
// plugins gave them; GetAllocatableResources names every device the node offers. The socket is root's
// alone, and calls are rate-limited as upstream limits them. This node has no CPU or memory manager: CPU
// IDs and memory are empty, as on upstream's kubelet with their "none" policies.
package podresources
