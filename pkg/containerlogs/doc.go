// Package containerlogs rotates the running containers' log files and keeps the /var/log/containers links to
// them that log shippers read, as upstream's kubelet does.
//
// Every ten seconds it looks at each running container's log: one that reached the size limit is renamed to
// "<log>.<timestamp>" and the runtime is asked to reopen the log (CRI ReopenContainerLog), so nothing is
// copied and no line is lost; the rotated file before it is gzipped, and rotated files beyond the file limit
// are removed, oldest first. A rename the runtime cannot follow is undone. Links named
// "<pod>_<namespace>_<container>-<container ID>.log" point at each container's current log; links whose
// file is gone are removed.
//
// It knows containers only through the kubelet's last relist (no runtime call but ReopenContainerLog), and
// touches nothing outside the pod log directory and the links directory.
package containerlogs
