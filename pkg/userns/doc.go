// Package userns gives pods that ask for a user namespace (spec.hostUsers: false) a range of host user and
// group IDs of their own, as upstream's kubelet does (pkg/kubelet/userns): the node's range is the kubelet
// entry of /etc/subuid and /etc/subgid when there is one, else upstream's default (from idsPerPod up to 2^32);
// it is cut into slots of idsPerPod IDs (65536 by default, userNamespaces.idsPerPod), and each such pod takes
// the lowest free slot, mapped to IDs 0..idsPerPod-1 inside the pod, the same for users and groups.
//
// A pod's slot is kept in its directory (<root dir>/pods/<uid>/userns, upstream's file and format), written
// atomically before the sandbox that uses it is created, so a restarted kubelet finds every allocation again
// before it starts anything; the slot is free again once the pod's directory is removed (Release). A file
// that does not parse or names a slot outside the range or already taken is an error for that pod alone.
//
// The range and its checks (ParseSubIDs, NodeRange, Range.Check) are pure functions with table tests.
package userns
