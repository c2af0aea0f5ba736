// Package supervisor restarts a child process that exits, with a back-off, as systemd's Restart=always with
// RestartSec doubling would: the standalone kubelet's lightweight API server. It knows nothing of what the
// child is; Starter starts one and Process watches it.
package supervisor
