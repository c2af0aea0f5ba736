// Package metrics holds the kubelet's Prometheus metrics, named, labelled and bucketed as upstream's kubelet
// names them (kubelet_pleg_relist_duration_seconds, kubelet_runtime_operations_total, ...), and the registry
// /metrics serves: these, rest_client_* of the API clients, and Go's and the process's own.
//
// It is a leaf: the packages that observe (the PLEG, the sync loop, the runtime wrapper) import it; it imports
// none of them. Observing never blocks and costs a few atomic operations.
package metrics
