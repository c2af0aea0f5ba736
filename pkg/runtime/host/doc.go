// Package host sets the built-in runtime up on a host and serves it: the flags both the kubelet and the
// runtime-only binary (cmd/noderuntime) take, the runtime configuration they make, the lock that keeps a
// second process off the same containerd namespace, and the CRI socket and streaming server. The kubelet and
// noderuntime call the same Start, so the runtime behaves alike whichever process hosts it.
package host
