package nodeinit

// Paths inside a node, as the node image lays them out.
const (
	Bin              = "/usr/local/bin"
	CNIBin           = "/usr/lib/cni"
	CNITemplate      = "/etc/nodeagent/cni/template.conflist"
	ContainerdConfig = "/etc/nodeagent/containerd/config.toml"
	Shared           = "/etc/nodeagent/cluster/shared" // the control plane's: every node's kubeconfig
	Own              = "/etc/nodeagent/cluster/node"   // a worker's: its own kubeconfig
	ImagesDir        = "/var/lib/nodeagent/images"
	ContainerdRoot   = "/var/lib/nodeagent/containerd"
)
