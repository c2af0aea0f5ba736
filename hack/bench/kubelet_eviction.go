package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/kubelet/pkg/eviction"
)

// evictionRuns is how many memory threshold crossings the latency figure is taken over.
const evictionRuns = 10

// runEviction measures the eviction manager at 110 pods: what its observations cost (the kubelet's idle CPU
// with the manager off, --eviction-hard= empty, beside on, the defaults; and one observation over the
// kubelet's own 110-pod summary timed in this process), and how long after the node's available memory
// crosses a memory.available threshold the eviction of the pod that made it cross starts (the kubelet's
// "evicting pod" log line against the crossing, which this process sees by reading the node's memory every
// 2 ms), over ten crossings. The floor printed beside it is how long the kubelet's stats gathering takes at
// 110 pods, the part of the latency that is a gathering.
func (b *kubeletBench) runEviction(ctx context.Context, restart func(extra []string) error) error {
	pods := names("evict", 110)
	progress("kubelet: 110 pods at 10/s")
	if err := b.create(ctx, pods, 100*time.Millisecond, corev1.RestartPolicyAlways, func(int) []string { return []string{"sleep", "3600"} }); err != nil {
		return err
	}
	if err := b.watch.waitAll(ctx, pods, "Ready", 5*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
		return fmt.Errorf("%w; log tail:\n%s", err, b.kl.logTail(2000))
	}
	for _, mode := range []struct {
		label string
		extra []string
	}{{"eviction_off", []string{"--eviction-hard="}}, {"eviction_on", nil}} {
		progress("kubelet: restarting with %s", mode.label)
		if err := restart(mode.extra); err != nil {
			return err
		}
		if err := b.idleWindow(ctx, "110pods_"+mode.label); err != nil {
			return err
		}
	}
	if err := b.timeObservation(ctx); err != nil {
		return err
	}

	// The crossings run beside 109 pods: each hog is the 110th, --max-pods' default.
	if _, err := b.deleteGone(ctx, "kubelet_delete1_eviction", pods[len(pods)-1:]); err != nil {
		return err
	}
	pods = pods[:len(pods)-1]
	avail, err := nodeMemoryAvailable()
	if err != nil {
		return err
	}
	threshold := avail - 400<<20
	progress("kubelet: memory.available %d MiB; restarting with a threshold at %d MiB", avail>>20, threshold>>20)
	if err := restart([]string{fmt.Sprintf("--eviction-hard=memory.available<%dMi", threshold>>20), "--eviction-pressure-transition-period=1s"}); err != nil {
		return err
	}
	var lat []time.Duration
	for run := 1; run <= evictionRuns; run++ {
		d, err := b.evictionLatency(ctx, run, threshold)
		if err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		progress("run %d: eviction started %v after the crossing", run, d.Round(time.Millisecond))
		lat = append(lat, d)
	}
	printLatencies("kubelet_eviction_memory_crossing_to_evicting", lat)
	figure("kubelet_eviction_memory_crossing_to_evicting_max", ms(percentile(lat, 100)), "ms")
	if _, err := b.deleteGone(ctx, "kubelet_delete110_eviction", pods); err != nil {
		return err
	}
	return nil
}

// timeObservation times the eviction manager's observation, in this process, over the summary the kubelet
// serves at 110 pods, with upstream's default thresholds (none met), and the memory watch's read of the
// node's memory; it prints what both cost at their rates (every 10 s, five times a second), and the
// kubelet's stats gathering time for comparison.
func (b *kubeletBench) timeObservation(ctx context.Context) error {
	data, err := b.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", benchNode, "proxy/stats/summary").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("/stats/summary: %w", err)
	}
	var sum statsapi.Summary
	if err := json.Unmarshal(data, &sum); err != nil {
		return err
	}
	list, err := b.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	active := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		active[i] = &list.Items[i]
	}
	ts, err := eviction.Parse(eviction.DefaultHard, nil, nil, nil)
	if err != nil {
		return err
	}
	m := eviction.New(eviction.Config{Thresholds: ts, Summary: func() *statsapi.Summary {
		s := sum
		s.Node.Memory.Time = metav1.Now() // never stale: the observation alone is timed
		return &s
	}, ActivePods: func() []*corev1.Pod { return active },
		Evicter: eviction.EvictFunc(func(context.Context, *corev1.Pod, int64, string) error {
			return fmt.Errorf("the bench evicts nothing")
		})})
	const n = 2000
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if m.Synchronize(ctx) != nil {
			return fmt.Errorf("a default threshold is met on this host: the observation cost is not measured")
		}
	}
	observe := time.Since(t0) / n
	t0 = time.Now()
	for i := 0; i < n; i++ {
		if _, err := nodeMemoryAvailable(); err != nil {
			return err
		}
	}
	read := time.Since(t0) / n
	figure("kubelet_eviction_observation_110pods", float64(observe.Nanoseconds())/1000, "us")
	figure("kubelet_eviction_memory_watch_read", float64(read.Nanoseconds())/1000, "us")
	// Finer than figure's one decimal: the cost is a few hundredths of a percent.
	fmt.Printf("kubelet_eviction_cost_110pods: %.3f %%core\n", (observe.Seconds()/10+read.Seconds()*5)*100)
	if c, err := b.endpointClient(); err == nil {
		if sum, count, err := b.histogram(ctx, c, "nodeagent_stats_gathering_duration_seconds"); err == nil && count > 0 {
			figure("kubelet_stats_gathering_110pods_floor", sum/count*1000, "ms")
		}
	}
	return nil
}

var evictingRE = regexp.MustCompile(`^I(\d{4} \d{2}:\d{2}:\d{2}\.\d{6})\s+\d+ \S+\] "Eviction manager: evicting pod" pod="default/([^"]+)"`)

// evictionLatency runs one crossing: a BestEffort pod allocates 700 MiB, this process notes when the node's
// available memory falls below threshold, and the kubelet's log says when it began evicting the pod.
func (b *kubeletBench) evictionLatency(ctx context.Context, run int, threshold int64) (time.Duration, error) {
	if err := b.waitMemoryCalm(ctx, threshold); err != nil {
		return 0, err
	}
	name := fmt.Sprintf("hog%d", run)
	pod := benchPodSpec(name, benchNode, name, corev1.RestartPolicyNever, "sh", "-c",
		`x=$(head -c 700m /dev/zero | tr "\0" a); while true; do sleep 1; done`)
	if _, err := b.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	var crossed time.Time
	for deadline := time.Now().Add(2 * time.Minute); crossed.IsZero(); time.Sleep(2 * time.Millisecond) {
		avail, err := nodeMemoryAvailable()
		if err != nil {
			return 0, err
		}
		if avail < threshold {
			crossed = time.Now()
		}
		if time.Now().After(deadline) {
			st := ""
			if p, err := b.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
				st = fmt.Sprintf("%s %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
			}
			return 0, fmt.Errorf("%s (%s) never took the node below the threshold (%d MiB available); log tail:\n%s",
				name, st, avail>>20, b.kl.logTail(3000))
		}
	}
	var started time.Time
	for deadline := time.Now().Add(time.Minute); started.IsZero(); time.Sleep(50 * time.Millisecond) {
		started = evictingAt(b.kl.logPath, name)
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s not evicted a minute after the crossing; log tail:\n%s", name, b.kl.logTail(2000))
		}
	}
	grace := int64(0)
	if err := b.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		return 0, err
	}
	// The manager reports MemoryPressure until an observation after the 1 s transition period, at most one
	// interval later; a hog created before that would be refused at admission.
	return started.Sub(crossed), sleepCtx(ctx, time.Until(started.Add(eviction.DefaultMonitorInterval+2*time.Second)))
}

// waitMemoryCalm waits until the node has 200 MiB above the threshold again and no memory pressure.
func (b *kubeletBench) waitMemoryCalm(ctx context.Context, threshold int64) error {
	for deadline := time.Now().Add(2 * time.Minute); ; {
		avail, err := nodeMemoryAvailable()
		if err != nil {
			return err
		}
		node, err := b.client.CoreV1().Nodes().Get(ctx, benchNode, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pressure := false
		for _, c := range node.Status.Conditions {
			pressure = pressure || c.Type == corev1.NodeMemoryPressure && c.Status == corev1.ConditionTrue
		}
		if avail > threshold+200<<20 && !pressure {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memory did not recover: %d MiB available, pressure %v", avail>>20, pressure)
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// evictingAt finds when the kubelet's log says it began evicting the pod; zero if it has not.
func evictingAt(logPath, pod string) time.Time {
	f, err := os.Open(logPath)
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := evictingRE.FindStringSubmatch(sc.Text())
		if m == nil || m[2] != pod {
			continue
		}
		t, err := time.ParseInLocation("0102 15:04:05.000000", m[1], time.Local)
		if err != nil {
			continue
		}
		now := time.Now()
		return t.AddDate(now.Year(), 0, 0)
	}
	return time.Time{}
}

// nodeMemoryAvailable is memory.available as the kubelet computes it: MemTotal less the node's working set
// (the root memory cgroup's usage less its inactive file pages on cgroup v1, /proc/meminfo on v2).
func nodeMemoryAvailable() (int64, error) {
	mem, err := meminfo("MemTotal:", "MemFree:", "Inactive(file):")
	if err != nil {
		return 0, err
	}
	total := mem["MemTotal:"]
	root := "/sys/fs/cgroup/memory"
	usage, err := os.ReadFile(filepath.Join(root, "memory.usage_in_bytes"))
	if err != nil { // cgroup v2: the working set from meminfo
		return total - max(total-mem["MemFree:"]-mem["Inactive(file):"], 0), nil
	}
	u, err := strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64)
	if err != nil {
		return 0, err
	}
	stat, err := os.ReadFile(filepath.Join(root, "memory.stat"))
	if err != nil {
		return 0, err
	}
	var inactive int64
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
			inactive, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return total - max(u-inactive, 0), nil
}

// meminfo reads the named fields of /proc/meminfo, in bytes.
func meminfo(keys ...string) (map[string]int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			for _, k := range keys {
				if f[0] == k {
					v, _ := strconv.ParseInt(f[1], 10, 64)
					out[k] = v << 10
				}
			}
		}
	}
	if len(out) != len(keys) {
		return nil, fmt.Errorf("/proc/meminfo lacks some of %v", keys)
	}
	return out, nil
}
