// Command kubelet is the node agent: it runs the pods the API server assigns to this node through the
// built-in runtime (containerd, CNI) or a remote CRI runtime, and reports their status.
//
// With no --kubeconfig it starts the lightweight API server (cmd/apiserver, found beside its own binary) as a
// child process and runs as a standalone node; the server ends with the kubelet, and the kubelet ends if the
// server does. This package only parses flags, builds the real pieces and wires them; logic lives in pkg/.
package main
