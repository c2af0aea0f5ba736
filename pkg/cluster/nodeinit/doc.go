// Package nodeinit is the PID 1 of a cluster node's container (cmd/nodeinit): it starts containerd, on the
// control plane the lightweight API server, then the kubelet, prefixes their output with their names, reaps
// the orphans that come to PID 1 (containerd's shims), and stops the node when one of them ends. It depends
// on nothing but the standard library and x/sys, so the process stays small in every node.
package nodeinit
