// Package offline keeps the node's checkpoint of its desired state and decides what runs from it when the
// node starts without its API server (offline autonomy).
//
// The checkpoint lives under <root-dir>/checkpoint/ (directories 0700, files 0600, each written atomically):
// the pods bound to the node as last seen from the API server (pods/<uid>.json), the objects their start
// reads (objects/<resource>/<namespace>/<name>.json: configMaps, secrets, claims and volumes), the service
// account tokens issued for them (tokens/<pod uid>/<key>.json) and their service environment variables
// (serviceenv/<uid>.json); the pods are written by their caller, the rest off the caller's path (later.go).
// Every file is an envelope {"version": 1, "object": ...}: a file of a newer
// version is refused with a clear error, a damaged one is logged and skipped, and neither stops the rest.
//
// Mode says which checkpointed pods run while the API server is away: Tolerating (the default) only those
// that tolerate node.kubernetes.io/unreachable:NoExecute forever, which the control plane never evicts from
// an unreachable node, so that no second copy can run elsewhere; All every pod; None none (and nothing is
// checkpointed), as upstream.
package offline
