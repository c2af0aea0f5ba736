// Command nodecluster runs kind-style clusters of node agent nodes on one host: each node a privileged
// container on the host's containerd with its own network, cgroup namespace, containerd and kubelet, the
// first one running the lightweight API server. See pkg/cluster and the README.
//
//	nodecluster up [N]          start N nodes (3) and wait until they are Ready
//	nodecluster down            remove the cluster and everything it made
//	nodecluster freeze NODE     freeze every process of a node (a hung machine); thaw NODE resumes it
//	nodecluster partition NODE  cut a node's link (ip link set eth0 down in its netns); heal NODE restores it
//	nodecluster kubeconfig      print the admin kubeconfig's path
//
// The node image's entrypoint is cmd/nodeinit, the node's PID 1.
package main
