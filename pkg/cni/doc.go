// Package cni owns pod networking for the built-in runtime: it creates and removes a pod's network namespace
// and calls the CNI plugins (through libcni) to attach it to and detach it from the node's pod network.
//
// It does not know about containers, sandboxes or the Kubernetes API: callers pass an ID, a namespace path and
// the pod's identity, and get the pod's IPs back. It never removes a namespace it did not create.
//
// Two departures from running the configured list as written, both to keep iptables off the path of every
// pod start and stop: pods without port mappings skip the port-mapping-only plugins (cni.go), and the bridge
// and ptp plugins' per-pod masquerade is replaced by one node-wide chain (masquerade.go). A DEL always runs
// with the configuration its ADD ran with.
package cni
