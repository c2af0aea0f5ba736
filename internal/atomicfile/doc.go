// Package atomicfile writes files that a reader, or a crash, sees whole or not at all: a temporary file in
// the same directory, synced, renamed over the target, and the directory synced. The kubelet's state
// (allocation checkpoint, service account tokens, serving certificates), the runtime's and the log daemon's
// records, and the kubeconfigs and keys the API server writes go through it.
package atomicfile
