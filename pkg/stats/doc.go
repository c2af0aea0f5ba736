// Package stats gathers what the node and its pods use (CPU, memory, network, filesystems, processes) on a
// timer, off the sync path, and serves the last gathering from memory: /stats/summary in upstream's
// stats/v1alpha1 shape, and the Prometheus series of /metrics/resource (what metrics-server scrapes) and
// /metrics/cadvisor (the container_* series dashboards read).
//
// CPU, memory and processes come from the cgroup files of the node, the pods and their containers (v1 and
// v2), network from /proc/net/dev in the host's and each pod's network namespace, the writable layers from
// the runtime, logs and volumes from the directories that hold them. CPU rates (usageNanoCores) are the
// difference between two gatherings. Filesystem usage, which walks directories, is measured once a minute,
// and at once for a pod seen for the first time.
//
// The package reads and reports; it changes nothing on the node. A request never waits for a gathering nor
// makes a runtime call.
package stats
