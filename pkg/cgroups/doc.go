// Package cgroups owns the kubelet's pod-level cgroups on cgroup v1, hybrid and
// v2 hosts, with the cgroupfs and the systemd drivers.
//
// It owns:
//   - host detection (v1, hybrid, v2) and the choice of driver, with one clear
//     start-up error when the choice does not fit the host;
//   - the QoS tree: the pods cgroup ("kubepods", sized to node allocatable),
//     "kubepods/burstable" and "kubepods/besteffort", whose CPU weights follow
//     the pods that come and go;
//   - one cgroup per pod ("pod<uid>") under its QoS class, Guaranteed pods
//     directly under the pods cgroup; its path is handed to the runtime as
//     the containers' cgroup parent;
//   - removal of pod cgroups (processes still inside are killed first), and
//     of orphaned pod cgroups that belong to no known pod;
//   - statistics read from the cgroup files, per pod and for the node;
//   - the resource math as upstream computes it, as pure functions: QoS class,
//     CPU shares, weight and quota, memory and pids limits, huge pages,
//     pod-level sums, node allocatable and oom_score_adj.
//
// The drivers are github.com/opencontainers/cgroups (fs for v1, fs2 for v2,
// systemd for both) on the host hierarchy at /sys/fs/cgroup. That library
// only manages /sys/fs/cgroup; a cgroup root elsewhere (a host hierarchy
// mounted at another path, or a test tree in a temporary directory) is
// written directly, with the same file names and formats.
//
// Tests: unit tests run anywhere on fake v1 and v2 trees in temporary
// directories; TestHostCgroups needs root and checks the kernel's files on
// the host's hierarchy (v1 here); hack/vm/test-cgroups.sh runs the same
// binary in a cgroup v2 guest with systemd as PID 1, for both drivers.
//
// It must not create or remove container cgroups (the runtime creates them
// under the pod cgroup), talk to the runtime or the API server, or decide
// which pods should run: callers tell it which pods exist.
package cgroups
