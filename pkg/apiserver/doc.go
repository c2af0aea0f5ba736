// Package apiserver is the lightweight Kubernetes API server: it wires the
// store (package storage), the resource table (registry), the REST handlers
// (rest), discovery, TLS and the auth filters (auth), and the small control
// loops upstream's controller-manager and scheduler would run (namespace
// deletion, placement of unbound pods, cleanup of pods whose node is gone,
// garbage collection of dependents by their ownerReferences, and the expiry
// of events after --event-ttl). In front of them it bounds the requests in
// flight (429 beyond, as kube-apiserver), times out requests that are not
// watches or streams (504), sets per-request read and write deadlines, and
// serves /healthz, /livez and /readyz with the store's health.
//
// It is run by cmd/apiserver (which a standalone kubelet starts as a child
// process) and by tests: New, then Start (or Run), then Stop. It owns its data
// directory and nothing else on the host.
package apiserver
