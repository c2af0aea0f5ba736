package nodedefaults

// Upstream's defaults.
const (
	// RootDir is where the kubelet keeps its state (upstream's --root-dir).
	RootDir = "/var/lib/kubelet"
	// PodLogsDir is where the pods' container logs are written (upstream's podLogsDir).
	PodLogsDir = "/var/log/pods"
	// MaxPods is how many pods the node takes (upstream's --max-pods).
	MaxPods = 110
)
