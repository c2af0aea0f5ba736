// Package httpjson writes JSON answers: the one writer of the kubelet's endpoint (pkg/server) and debug page,
// and of the API server's discovery and metrics.k8s.io. It sets the content type and turns an encoding
// failure into a 500; it knows nothing of the values it writes.
package httpjson
