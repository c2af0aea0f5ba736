// Package eviction is the kubelet's node-pressure eviction manager, as upstream's: it parses the eviction
// thresholds (--eviction-hard, --eviction-soft with their grace periods, --eviction-minimum-reclaim), observes
// the signals (memory.available, allocatableMemory.available, nodefs.available, nodefs.inodesFree,
// imagefs.available, imagefs.inodesFree, pid.available) from the stats summary the kubelet gathers every
// 10 s, reports the MemoryPressure, DiskPressure and PIDPressure conditions (held for the pressure transition
// period), refuses pods under pressure at admission (BestEffort ones under memory pressure, all of them under
// disk or PID pressure; critical pods always pass), and, when a threshold is met past its grace period,
// first reclaims what the node itself holds (dead containers, unused images) and then evicts one pod per
// interval, ranked as upstream ranks them: pods using more than they request first, then by priority, then
// by usage above requests.
//
// The decisions (parsing, the signals, the thresholds met, the conditions, the ranking, the message) are pure
// functions with table tests; Manager holds the state between observations and calls out through small
// interfaces: a Summary source, the active pods, a Reclaimer for node-level resources and an Evicter that
// terminates a pod with phase Failed and reason Evicted.
//
// A signal the summary lacks (a failed statfs or cgroup read) is not observed, and its thresholds are not
// met: an unknown value is never taken for zero, which would evict everything. The package kills nothing
// itself.
package eviction
