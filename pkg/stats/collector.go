package stats

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/pkg/cgroups"
	"github.com/nodeagent/kubelet/pkg/metrics"
	"github.com/nodeagent/kubelet/pkg/nodedefaults"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// Defaults, upstream's (cAdvisor's housekeeping and its filesystem refresh).
const (
	DefaultInterval   = 10 * time.Second
	DefaultFSInterval = time.Minute
)

// Cgroups reads usage from cgroup files (pkg/cgroups.Manager).
type Cgroups interface {
	NodeStats(ctx context.Context) (cgroups.Stats, error)
	PodsStats(ctx context.Context) (cgroups.Stats, error)
	PodStats(ctx context.Context, uid types.UID) (cgroups.Stats, error)
	ContainersStats(ctx context.Context, uid types.UID, ids []string) (map[string]cgroups.Stats, error)
	PodPID(uid types.UID) (int, error)
}

// Pod is a pod the node runs, as the kubelet knows it.
type Pod struct {
	Name, Namespace string
	UID             types.UID
	StartTime       time.Time
	HostNetwork     bool
	Containers      []Container
	// Volumes says, for each volume of the pod, whether it counts as the pod's ephemeral storage (emptyDir
	// on disk, configMap), and the claim it mounts.
	Volumes map[string]VolumeInfo
}

// VolumeInfo is what the summary says of a volume besides its usage.
type VolumeInfo struct {
	Ephemeral bool
	Claim     string // the PersistentVolumeClaim's name, for a claim
}

// Container is a running container of a pod.
type Container struct {
	Name, ID  string
	Image     string
	StartTime time.Time
}

// Config is what a Collector needs. NodeName, Cgroups and Pods are required.
type Config struct {
	NodeName string
	Cgroups  Cgroups
	// Pods returns the pods the node runs, with their running containers.
	Pods func() []Pod
	// Layers measures the writable layers of the containers with the given IDs (all of them for nil), by
	// container ID (the runtime's); nil: none.
	Layers func(ctx context.Context, ids []string) (map[string]volume.Usage, error)
	// ImageFs is the image filesystem's usage and mount point (the runtime's ImageFsInfo); nil: none.
	ImageFs func(ctx context.Context) (volume.Usage, string, error)
	// Volumes measures a pod's volumes by name (pkg/volume); nil: none.
	Volumes func(uid types.UID) (map[string]volume.Usage, error)
	// CSIVolumes asks the drivers of a pod's CSI volumes for their usage, by volume name (NodeGetVolumeStats);
	// nil: none.
	CSIVolumes func(ctx context.Context, uid types.UID) (map[string]volume.VolumeStats, error)
	// VolumeAbnormal, when set, is told of each CSI volume whose driver reports it abnormal, at each
	// measurement (upstream's VolumeConditionAbnormal event).
	VolumeAbnormal func(pod Pod, volume, message string)
	// PodsMemory returns the memory pods may use (the node's allocatable): the pods cgroup's available
	// memory, allocatableMemory.available, is what is left of it. Optional.
	PodsMemory func() int64
	// RootDir is the kubelet's root directory, whose filesystem is the nodefs; LogsDir holds the pods' logs.
	RootDir, LogsDir string
	// ProcRoot is /proc.
	ProcRoot string
	// BootTime is when the node started (the node's startTime); zero: read from ProcRoot/stat.
	BootTime time.Time
	Clock    clock.WithTicker
	// Interval is how often usage is gathered (10 s); FSInterval how often directories are measured (1 min).
	Interval, FSInterval time.Duration
}

// Collector gathers usage every Interval and serves the last gathering. It is safe for concurrent use.
type Collector struct {
	cfg  Config
	last atomic.Pointer[snapshot]
	// Only the gathering goroutine touches what follows.
	prev   map[string]cpuSample // the last CPU reading of each cgroup, for rates
	fs     map[types.UID]podFS  // the last filesystem measurement of each pod
	fsAt   time.Time
	layers map[string]volume.Usage  // the containers' writable layers as last measured
	pids   map[types.UID]podProcess // a process of each pod, to read its network from
	mu     sync.Mutex               // serialises gatherings (Run and Collect)
}

// snapshot is one gathering: the summary and when it took how long.
type snapshot struct {
	summary      *statsapi.Summary
	pods         []Pod // the pods of summary.Pods, in its order
	imageFsMount string
	at           time.Time
	took         time.Duration
	failures     int // readings that failed (a pod that went away meanwhile counts)
}

type cpuSample struct {
	at    time.Time
	usage uint64
	rate  *uint64 // the rate computed at this reading (nil for a first one)
}

// podFS is what a pod's directories held at the last measurement.
type podFS struct {
	at      time.Time
	volumes map[string]volume.Usage
	csi     map[string]volume.VolumeStats // the CSI volumes, as their drivers report them
	logs    map[string]volume.Usage       // by container name
}

// New returns a collector; Run gathers.
func New(cfg Config) *Collector {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.FSInterval <= 0 {
		cfg.FSInterval = failpoint.Duration(failpoint.StatsFSInterval)
	}
	if cfg.FSInterval <= 0 {
		cfg.FSInterval = DefaultFSInterval
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.LogsDir == "" {
		cfg.LogsDir = nodedefaults.PodLogsDir
	}
	if cfg.BootTime.IsZero() {
		cfg.BootTime = bootTime(cfg.ProcRoot)
	}
	return &Collector{cfg: cfg, prev: map[string]cpuSample{}, fs: map[types.UID]podFS{}, pids: map[types.UID]podProcess{}}
}

// Run gathers at once, then every Interval, until ctx is done.
func (c *Collector) Run(ctx context.Context) {
	t := c.cfg.Clock.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		c.Collect(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Collect gathers once and makes the result the one served.
func (c *Collector) Collect(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The gathering runs on a thread of its own, whose CPU time is then the gathering's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	start := c.cfg.Clock.Now()
	g := &gathering{c: c, ctx: ctx, now: start}
	sum := g.summary()
	took := c.cfg.Clock.Since(start)
	metrics.StatsGatheringDuration.Observe(took.Seconds())
	metrics.StatsGatheringCPU.Add((threadCPU() - cpu0).Seconds())
	c.last.Store(&snapshot{summary: sum, pods: g.pods, imageFsMount: g.mount, at: start, took: took, failures: g.failures})
	klog.FromContext(ctx).V(5).Info("Gathered node and pod stats", "pods", len(sum.Pods), "took", took, "failures", g.failures)
}

// podsMemory is the pods cgroup's memory limit for its available memory; 0 when unknown.
func (c *Collector) podsMemory() uint64 {
	if c.cfg.PodsMemory == nil {
		return 0
	}
	return uint64(max(c.cfg.PodsMemory(), 0))
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Summary returns the last gathering (nil before the first). Callers must not change it.
func (c *Collector) Summary() *statsapi.Summary {
	if s := c.last.Load(); s != nil {
		return s.summary
	}
	return nil
}

// LastGathering reports when the last gathering began, how long it took and how many readings failed.
func (c *Collector) LastGathering() (time.Time, time.Duration, int) {
	if s := c.last.Load(); s != nil {
		return s.at, s.took, s.failures
	}
	return time.Time{}, 0, 0
}

// rate turns a cumulative CPU reading of a cgroup into nanocores since its previous reading; nil for the
// first reading or a counter that went back (a new cgroup of the same name).
func (c *Collector) rate(key string, at time.Time, usage uint64) *uint64 {
	prev, ok := c.prev[key]
	elapsed := at.Sub(prev.at)
	if ok && elapsed < c.cfg.Interval/2 && usage >= prev.usage {
		// A gathering soon after another (the eviction manager asks for one at a memory threshold
		// crossing): the cgroups are read some milliseconds apart within a gathering, which over so short a
		// window would make the rate meaningless. The last rate stands, and the reading stays the base.
		return prev.rate
	}
	sample := cpuSample{at: at, usage: usage}
	if ok && elapsed > 0 && usage >= prev.usage {
		v := uint64(float64(usage-prev.usage) / elapsed.Seconds())
		sample.rate = &v
	}
	c.prev[key] = sample
	return sample.rate
}

func ptr[T any](v T) *T { return &v }

func mtime(t time.Time) metav1.Time { return metav1.NewTime(t) }
