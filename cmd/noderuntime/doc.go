// Command noderuntime serves the built-in runtime over CRI with nothing else running: no sync loop, no API
// client, no pod cleanup. It is for CRI clients other than this project's kubelet (upstream's kubelet,
// crictl, critest), which use it as they use containerd's CRI plugin. It sets the runtime up with the same
// flags, defaults and code as the kubelet's built-in runtime (pkg/runtime/host), and holds the same
// containerd namespace lock, so a kubelet with the built-in runtime and noderuntime never share a namespace.
package main
