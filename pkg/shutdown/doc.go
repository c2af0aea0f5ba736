// Package shutdown is the kubelet's graceful node shutdown, as upstream's: it holds a systemd-logind delay
// inhibitor lock for shutdown, raises logind's InhibitDelayMaxSec to the configured grace period when it is
// shorter, and when logind announces the shutdown (PrepareForShutdown) marks the node not ready and
// terminates the pods in groups, lowest priority first, each group within its budget
// (shutdownGracePeriodByPodPriority, or shutdownGracePeriod with shutdownGracePeriodCriticalPods kept for
// critical pods), then releases the lock so that the shutdown goes on.
//
// It talks to logind through the Logind interface (D-Bus on a real host) and to the kubelet through
// callbacks; it decides the groups with pure functions. Without logind (no systemd, no D-Bus) the kubelet
// runs on without it and says so once.
package shutdown
