package failpoint

import (
	"os"
	"strings"
	"syscall"
	"time"
)

// EnvVar names the points the process dies at.
const EnvVar = "NODEAGENT_FAILPOINTS"

// Points of the pod start the fault suite kills the kubelet at.
const (
	AfterPodCgroup       = "after-pod-cgroup"       // the pod cgroup exists, nothing of the sandbox yet
	AfterCNIAdd          = "after-cni-add"          // the pod network is set up, the pause container maybe not
	AfterSandbox         = "after-sandbox"          // RunPodSandbox returned, no container created yet
	AfterContainerCreate = "after-container-create" // a container is created, not started
	AfterDRAPrepare      = "after-dra-prepare"      // the pod's ResourceClaims are prepared, no sandbox yet
	BeforeDRAUnprepare   = "before-dra-unprepare"   // a terminated pod's containers are gone, its claims prepared
	// DRACallTimeout=<duration>: the kubelet's calls to DRA drivers time out after that instead of 45 s.
	DRACallTimeout = "dra-call-timeout"
	// CSICallTimeout=<duration>: the kubelet's stage and publish calls to CSI drivers time out after that
	// instead of 2 minutes.
	CSICallTimeout = "csi-call-timeout"
	// StatsFSInterval=<duration>: the kubelet measures volumes and asks CSI drivers for their volumes' stats
	// and health that often instead of every minute.
	StatsFSInterval = "stats-fs-interval"
	// HangContainerStatus=<container name>: the runtime's ContainerStatus of that container never returns,
	// as a wedged shim's would.
	HangContainerStatus = "hang-container-status"
	// TokenClockAhead=<duration>: the kubelet's service account token cache reads its clock that much ahead,
	// so that a token's renewal (at 80% of its lifetime, 480 s of the shortest) comes that much sooner.
	TokenClockAhead = "token-clock-ahead"
	// CrashBackoffMax=<duration>: the kubelet's crash-loop and image-pull back-offs start at and never exceed
	// that duration, so that a test sees many restarts of a crashing container in seconds.
	CrashBackoffMax = "crash-backoff-max"
)

var (
	enabled bool
	points  map[string]string // name -> value ("" for a plain point)
)

func init() {
	v := os.Getenv(EnvVar)
	if v == "" {
		return
	}
	points = map[string]string{}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			name, value, _ := strings.Cut(p, "=")
			points[name] = value
		}
	}
	enabled = len(points) > 0
}

// Hit kills the process with SIGKILL when name is listed in NODEAGENT_FAILPOINTS.
func Hit(name string) {
	if !enabled {
		return
	}
	if _, ok := points[name]; !ok {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// HangIf blocks the calling goroutine for good when name=value is listed in NODEAGENT_FAILPOINTS.
func HangIf(name, value string) {
	if !enabled {
		return
	}
	if v, ok := points[name]; ok && v == value {
		select {}
	}
}

// Duration is the duration listed as name=<duration> in NODEAGENT_FAILPOINTS, or 0.
func Duration(name string) time.Duration {
	if !enabled {
		return 0
	}
	d, err := time.ParseDuration(points[name])
	if err != nil {
		return 0
	}
	return d
}
