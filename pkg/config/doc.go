// Package config gathers the pods this node must run from their sources and merges them into one stream of
// updates for the sync loop.
//
// Two sources: the API server (a client-go informer on pods with spec.nodeName=<node>, which resumes after a
// disconnect from its last resourceVersion) and a static manifest directory (YAML or JSON files, watched with
// inotify and re-listed every 20 s). Static pods get a stable UID derived from their content and the
// kubernetes.io/config.* annotations; MirrorClient mirrors them into the API. A file that does not parse is
// reported (log and event) and skipped; the other pods are unaffected.
//
// The package must not run pods or talk to the container runtime; it only says which pods should exist.
package config
