// Package node makes this machine a node of the cluster: it registers the Node object (name, labels, taints,
// addresses, capacity, allocatable, node info, daemon endpoints, images), keeps its status current (computed
// every 10 s, posted as a strategic-merge patch of nodes/status when it changed or every 5 min, with the Ready,
// MemoryPressure, DiskPressure and PIDPressure conditions), and renews the node's Lease in kube-node-lease
// (40 s, every 10 s).
//
// Agent is the one writer of the Node's status and of its Lease. It never gives up on the API server: every
// call is retried with backoff, failures are logged once per streak and again on recovery, and after an
// outage the status is re-read from the API and posted again. The decisions (what the status is, whether to
// post it, the conditions, the lease to write, capacity and allocatable) are pure functions of their inputs;
// the host is read through small readers that tests point at a fake /proc, /sys and /etc.
//
// The package reads the host (/proc, /sys, /etc, netlink, statfs) and talks to the API server and, for its
// version and images only, to the container runtime. It must not start, stop or change pods or containers,
// and must not evict: it only reports the pressure the eviction manager decides.
package node
