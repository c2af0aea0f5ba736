// Command apiserver runs the lightweight Kubernetes API server (pkg/apiserver) on its own: as the control
// plane of a cluster of nodes (cmd/nodecluster, pkg/cluster), or as the child a standalone kubelet starts.
// It parses flags into apiserver.Config, writes an admin kubeconfig (and, with --node-kubeconfig, one per
// node once serving), and serves until SIGINT or SIGTERM.
//
// "apiserver snapshot save|restore" copies the store (DATA-DIR/state.db) out of a running server (GET
// /snapshot, admins only) or out of the file when none runs, and puts a verified copy back while none runs
// (see snapshot.go and docs/apiserver.md).
package main
