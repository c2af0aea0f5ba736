// Package criserver serves a CRI runtime (any k8s.io/cri-api RuntimeService and ImageManagerService, the
// built-in runtime in particular) over gRPC on a unix socket, so that node tools (crictl) and CRI validation
// suites reach this node as they reach containerd. It also builds the CRI streaming server that turns the
// runtime's Exec, Attach and PortForward calls into URLs.
//
// It owns the socket and the translation between the gRPC messages and the Go interfaces: request fields to
// arguments, returned errors to gRPC status codes, and a failed ExecSync command to an exit code. It makes no
// decision of its own and keeps no state beyond the servers it runs; it must not reach into the runtime it
// serves except through those interfaces (and, for streaming, the runtime's Streamer).
package criserver
