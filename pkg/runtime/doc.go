// Package runtime is the built-in container runtime: it implements the CRI RuntimeService and
// ImageManagerService Go interfaces of k8s.io/cri-api over the containerd Go client, against a plain
// containerd daemon (no CRI plugin).
//
// It owns pod sandboxes (a network namespace attached through pkg/cni, and a pause container holding the pod's
// pid, ipc and uts namespaces), app containers joining them, container logs in the CRI format, exec, attach and
// port-forward as Go calls, and images. All of its state lives in containerd (container labels and extensions),
// so a restarted process finds every sandbox and container again; nothing is kept only in memory except caches
// and the containers' stdin, which New reopens. Containers' output is copied into their CRI logs by the
// container log daemon (pkg/logd, cmd/containerlogd), a process of its own that outlives this one, and that
// rotates the logs by the limits the runtime passes it.
//
// It does not own pod cgroups (the kubelet creates them and passes the parent), nor any decision about what
// should run: it does what the CRI calls ask, and undoes a partial create when a step fails.
//
// The sub-package remote is the same contract over gRPC to another CRI runtime; criserver serves this runtime
// over gRPC on a unix socket.
package runtime
