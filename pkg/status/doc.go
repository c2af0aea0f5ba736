// Package status turns what the runtime reports about a pod into the pod's API status, and writes that status
// to the API server.
//
// Compute is a pure function: pod spec + CRI sandbox and container statuses + the reasons the last sync could
// not start a container -> v1.PodStatus (phase, conditions, container statuses, IPs, QoS class). It reads no
// clock and does no I/O. Manager is the only writer of pod status to the API: one goroutine sends strategic
// merge patches of what changed, retries failures, writes a static pod's status to its mirror pod, and
// confirms a deleted pod's removal (grace 0) once its final status is written.
//
// The package must not talk to the container runtime, and must not decide what runs: it reports.
package status
