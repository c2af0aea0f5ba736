package runtime

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// oomScoreClamp knows the lowest oom_score_adj this host lets us give a process. Hosts without
// CAP_SYS_RESOURCE refuse negative values, and runc then fails the whole container start; so the runtime
// raises what it is asked for to that floor, warning once.
type oomScoreClamp struct {
	floor    int
	warnOnce sync.Once
}

func newOOMScoreClamp() *oomScoreClamp {
	return &oomScoreClamp{floor: probeOOMScoreFloor("/proc/self/oom_score_adj")}
}

// probeOOMScoreFloor tries to lower our own oom_score_adj to the minimum and restores it. When that is refused
// the floor is our current value, since a process may always keep or raise its own score. A restore that
// does not hold (read back) is retried and, failing that, logged as an error: the process would otherwise
// be left the last the kernel kills, silently.
func probeOOMScoreFloor(path string) int {
	cur, err := readOOMScore(path)
	if err != nil {
		return 0
	}
	if err := os.WriteFile(path, []byte("-1000"), 0); err != nil {
		return cur
	}
	if err := restoreOOMScore(path, cur); err != nil {
		klog.Background().Error(err, "Failed to restore the process's oom_score_adj after probing the host's floor",
			"path", path, "want", cur)
	}
	return -1000
}

// restoreOOMScore writes want to path and checks that it holds, three times at most.
func restoreOOMScore(path string, want int) error {
	var err error
	for try := 0; try < 3; try++ {
		if err = os.WriteFile(path, []byte(strconv.Itoa(want)), 0); err != nil {
			continue
		}
		var got int
		if got, err = readOOMScore(path); err == nil && got != want {
			err = fmt.Errorf("oom_score_adj reads %d after writing %d", got, want)
		}
		if err == nil {
			return nil
		}
	}
	return err
}

func readOOMScore(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// clamp returns want raised to the host's floor.
func (c *oomScoreClamp) clamp(want int) int {
	if want >= c.floor {
		return want
	}
	c.warnOnce.Do(func() {
		klog.Background().Info("Host refuses lower oom_score_adj; clamping", "wanted", want, "floor", c.floor,
			"hint", fmt.Sprintf("grant CAP_SYS_RESOURCE to allow values below %d", c.floor))
	})
	return c.floor
}
