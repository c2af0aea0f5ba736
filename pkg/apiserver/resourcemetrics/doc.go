// Package resourcemetrics serves metrics.k8s.io/v1beta1 (NodeMetrics and PodMetrics) from the lightweight API
// server, as metrics-server serves it for kube-apiserver, so that `kubectl top node` and `kubectl top pod`
// work on a standalone node with nothing to install.
//
// Like metrics-server it scrapes each node's kubelet /metrics/resource every 15 s, keeps the last two samples
// of each node, pod and container, and reports CPU as the rate between them and memory as the last working
// set. It keeps nothing on disk; a restarted server needs two scrapes before it reports again.
package resourcemetrics
