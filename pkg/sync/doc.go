// Package podsync (imported as podsync; the directory is pkg/sync) makes the container runtime match the pods
// assigned to this node, and reports what really happens.
//
// Kubelet is the entry point: one sync loop selects over pod source updates, PLEG events, a 1 s sync tick and
// 2 s housekeeping; one worker goroutine per pod, with a single pending-update slot (updates coalesce), walks
// the Sync -> Terminating -> Terminated state machine. Syncing a pod admits it, creates its directory and
// cgroup, its sandbox, its init containers in order (sidecars stay running), its app containers; it pulls
// images by policy, resolves env, restarts with CrashLoopBackOff, and reports status through pkg/status.
// Terminating honours the grace period (preStop hooks inside it), stops app containers, then sidecars, then
// the sandbox; Terminated removes what is left and confirms the deletion in the API.
//
// What a pod's spec becomes in CRI terms (the sandbox and container configs, security contexts, DNS, env,
// labels, the container hash) is pkg/podspec's, a pure package: this one resolves what podspec needs (the
// API objects env refers to, the image's user, volumes, the node's resolv.conf and /etc/hosts), calls it, and
// keeps the engine.
//
// The package talks to the runtime only through the CRI interfaces (k8s.io/cri-api), to the API through
// client-go, and to pod cgroups through PodCgroups. It must not read the wall clock (k8s.io/utils/clock) and
// must not reach into a runtime's internals.
package podsync
