package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Upstream's oom_score_adj values (pkg/kubelet/qos/policy.go).
const (
	// KubeletOOMScoreAdj is the kubelet's own oom_score_adj.
	KubeletOOMScoreAdj = -999
	// MinOOMScoreAdj is the kernel's lowest oom_score_adj.
	MinOOMScoreAdj = -1000
	// capSysResource is CAP_SYS_RESOURCE, needed to lower oom_score_adj
	// below the value a process started with.
	capSysResource = 24
)

// ClampOOMScoreAdj raises adj to floor, the lowest value the host lets the
// runtime set (see OOMScoreAdjFloor), and keeps it within [-1000, 1000].
func ClampOOMScoreAdj(adj, floor int) int {
	return min(max(adj, floor, MinOOMScoreAdj), podfacts.BestEffortOOMScoreAdj)
}

// OOMScoreAdjFloor returns the lowest oom_score_adj the process pid can
// safely give its children: -1000 with CAP_SYS_RESOURCE in its effective
// set; otherwise its own oom_score_adj, since without that capability the
// kernel refuses values below the lowest one a privileged ancestor set (and
// runc then fails to start the container), while values at or above the
// current one are always accepted. procRoot is normally "/proc".
func OOMScoreAdjFloor(procRoot string, pid int) (int, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	capEff, err := parseCapEff(string(status))
	if err != nil {
		return 0, err
	}
	if capEff&(1<<capSysResource) != 0 {
		return MinOOMScoreAdj, nil
	}
	raw, err := os.ReadFile(filepath.Join(dir, "oom_score_adj"))
	if err != nil {
		return 0, fmt.Errorf("read oom_score_adj: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("parse oom_score_adj %q: %w", raw, err)
	}
	return v, nil
}

func parseCapEff(status string) (uint64, error) {
	for line := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			c, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("parse CapEff %q: %w", v, err)
			}
			return c, nil
		}
	}
	return 0, fmt.Errorf("no CapEff line in process status")
}

// ContainerOOMGroup reports whether a container's cgroup gets
// memory.oom.group=1, so that an OOM kill takes the whole container rather
// than one process: on cgroup v2 unless --single-process-oom-kill is set,
// as upstream. The runtime puts it in the container's OCI spec
// (linux.resources.unified); pod cgroups do not carry it.
func ContainerOOMGroup(mode Mode, singleProcessOOMKill bool) bool {
	return mode.unified() && !singleProcessOOMKill
}
