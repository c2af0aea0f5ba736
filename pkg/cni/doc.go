// Package cni owns pod networking for the built-in runtime: it creates and removes a pod's network namespace
// and calls the CNI plugins (through libcni) to attach it to and detach it from the node's pod network.
//
// It does not know about containers, sandboxes or the Kubernetes API: callers pass an ID, a namespace path and
// the pod's identity, and get the pod's IPs back. It never removes a namespace it did not create.
package cni
