package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/cgroups"
	"github.com/nodeagent/kubelet/pkg/podspec"
	"github.com/nodeagent/kubelet/pkg/runtime/specopts"
)

// swapOn says whether the host has swap on: a device or file listed in /proc/swaps below its header, as
// upstream's kubelet reads it.
func swapOn(procRoot string) (bool, error) {
	f, err := os.Open(filepath.Join(procRoot, "swaps"))
	if os.IsNotExist(err) {
		return false, nil // a kernel without swap support
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			lines++
		}
	}
	return lines > 1, sc.Err()
}

// swapConfig is what the pod sync needs to give each container its swap limit (podspec.ConfigureSwap).
// LimitedSwap on a cgroup v1 host is NoSwap, as upstream treats it; the kubelet says so once, in its log and
// as a Warning event on the Node.
func (p *nodeParts) swapConfig(ctx context.Context, memoryBytes, swapBytes int64) podspec.Swap {
	v2 := p.cg.Mode() == cgroups.ModeV2
	if p.o.swapBehavior == podspec.LimitedSwap && !v2 {
		const msg = "memorySwap.swapBehavior LimitedSwap needs cgroup v2; this host runs cgroup v1: containers get no swap (NoSwap)"
		klog.FromContext(ctx).Info("Warning: swap configuration", "message", msg)
		p.recorder.Eventf(nodeRef(p.d.name), v1.EventTypeWarning, "SwapBehaviorNotSupported", msg)
	}
	return podspec.Swap{Behavior: p.o.swapBehavior, CgroupV2: v2, ControllerAvailable: specopts.SwapControllerAvailable(),
		MemoryCapacity: memoryBytes, SwapCapacity: swapBytes}
}
