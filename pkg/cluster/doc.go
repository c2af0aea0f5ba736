// Package cluster runs a kind-style cluster of node agent nodes on one host: each node is a privileged
// container on the host's containerd (the project's own instance, namespace "nodeagent-cluster") with its
// own network namespace on a bridge, its own cgroup namespace, and inside it containerd, the kubelet with
// the built-in runtime and, on the first node, the lightweight API server (or upstream's control plane on the
// host).
//
// The pieces:
//
//   - plan.go: the names and addresses of a cluster of N nodes (pure);
//   - image.go: the node image, built with internal/ociimage from the project's binaries, containerd and
//     runc, the CNI plugins, iptables and the shared libraries they need (found with ldd), and the pause and
//     busybox image archives (imported by each node's kubelet from its preload directory);
//   - network.go: the bridge, each node's network namespace and veth, a partition (link down) and its heal;
//   - nodes.go: the node containers (create, start, freeze, thaw, delete);
//   - cluster.go: up and down, with the checks that say which kernel feature a host lacks;
//   - controlplane.go: upstream's control plane on the host instead (hack/control-plane.sh with the
//     controller manager and the scheduler), its kubeconfigs, and stopping it by its recorded PIDs;
//   - nodeinit (a package of its own, for a small PID 1): the node containers' PID 1 (containerd, the API
//     server, the kubelet, zombie reaping);
//   - network.go also keeps the routes to the other nodes' pod CIDRs, from the Nodes' spec.podCIDR.
//
// Everything a cluster leaves on the host is named from its name: containers labelled with it, network
// namespaces, links, cgroups and its state directory; down removes them all and is safe to repeat.
package cluster
