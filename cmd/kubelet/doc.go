// Command kubelet is the node agent: it runs the pods the API server assigns to this node through the
// built-in runtime (containerd, CNI) or a remote CRI runtime, and reports their status.
//
// With no --kubeconfig it starts the lightweight API server (cmd/apiserver, found beside its own binary) as a
// child process and runs as a standalone node; the server ends with the kubelet, and when it exits the
// kubelet starts it again with a back-off (pkg/supervisor). This package only parses flags, builds the real
// pieces and wires them; logic lives in pkg/ (the configuration file's merge and strict decode in
// pkg/kubeletconfig).
package main
