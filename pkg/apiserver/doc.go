// Package apiserver is the lightweight Kubernetes API server: it wires the
// store (package storage), the resource table (registry), the REST handlers
// (rest), discovery, TLS, the auth filters and service account tokens
// (auth), mutating admission (admission: ServiceAccount, Service IPs and node
// ports), and the small control loops upstream's controller-manager and
// scheduler would run (namespace deletion, each namespace's default
// ServiceAccount and kube-root-ca.crt ConfigMap, placement of unbound pods,
// cleanup of pods whose node is gone, garbage collection of dependents by
// their ownerReferences, the binding of PersistentVolumeClaims to statically
// provisioned PersistentVolumes, the claims of generic ephemeral volumes, the
// VolumeAttachments of csi volumes, the expiry of events after --event-ttl, and
// the kubernetes Service in default that points at the server). In front of
// them it bounds the requests in flight (429 beyond, as kube-apiserver),
// times out requests that are not watches or streams (504), sets per-request
// read and write deadlines, and serves /healthz, /livez and /readyz with the
// store's health (to anonymous callers too, with /version, without the
// reasons of a failure).
//
// It is run by cmd/apiserver (which a standalone kubelet starts as a child
// process) and by tests: New, then Start (or Run), then Stop. It owns its data
// directory and nothing else on the host.
package apiserver
