// Package logd copies containers' output into their CRI log files, in a process of its own (cmd/containerlogd)
// so that a container's output does not depend on the kubelet being up.
//
// The built-in runtime creates each container's stdout and stderr FIFOs and asks the daemon to Open them with
// the container's log path and rotation limits before the task is created; the shim writes the container's
// output into them. The daemon splits the output into CRI records ("<RFC3339Nano> stdout|stderr F|P line"),
// appends them to the log, rotates it at its size limit (renamed to "<log>.<timestamp>", older files gzipped
// and pruned, as the kubelet's log manager does), reopens it when its file or directory is removed, and copies
// the raw output to attach sessions. A kubelet that stops, crashes or is upgraded leaves the daemon copying;
// when it comes back it opens every running container again, which the daemon answers as already open.
//
// The daemon keeps a record (<state dir>/<container ID>.json) of each container it copies for, written before
// it answers an Open and removed when the output ends, so that a daemon that is restarted (killed by hand or
// by the OOM killer, upgraded) reopens the same FIFOs and goes on; the shim holds the container's writes
// meanwhile. The runtime's Client keeps a connection open to the daemon and starts it again at once when it
// goes away. A daemon run by the kubelet exits on its own once it has had no container and no client for a
// while; one run by systemd (make install's nodeagent-containerlogd.service) serves until it is stopped.
//
// Daemon is also the Service run in-process, for a runtime configured without a daemon binary: output then
// stops while that process is down, as it did before the daemon existed.
package logd
