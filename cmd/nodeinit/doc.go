// Command nodeinit is the PID 1 of a cluster node's container (see pkg/cluster/nodeinit, which does the
// work: containerd, the API server on the control plane, the kubelet, reaping orphans); nodecluster starts
// it with the node's name, address and role. This package only parses those flags.
package main
