package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/systemd"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// HostRoot is where the host's cgroup hierarchies are mounted.
const HostRoot = "/sys/fs/cgroup"

// Config is the node's cgroup settings. The zero value of every field is
// upstream's default.
type Config struct {
	// Root is the mount root of the cgroup hierarchies; HostRoot if empty.
	Root string
	// Driver is --cgroup-driver; cgroupfs if empty.
	Driver Driver
	// CgroupRoot is the cgroupfs path of the pods cgroup; DefaultCgroupRoot
	// ("/kubepods") if empty. With the systemd driver "/kubepods" becomes
	// kubepods.slice.
	CgroupRoot string
	// Capacity is the node's capacity (cpu, memory, pid, hugepages-*);
	// MachineCapacity(ProcRoot) if nil.
	Capacity v1.ResourceList
	// KubeReserved, SystemReserved and EvictionHard (the hard eviction
	// thresholds as quantities, such as memory: 100Mi) are taken from
	// Capacity to size the pods cgroup.
	KubeReserved, SystemReserved, EvictionHard v1.ResourceList
	// Pod shapes pod cgroups: CPU quota, its period, the pods' pids limit.
	Pod PodOptions
	// HugePageSizes are the host's huge page sizes in bytes; read from
	// the host if nil. Used only when the hugetlb controller is.
	HugePageSizes []int64
	// ProcRoot is the proc filesystem; "/proc" if empty.
	ProcRoot string
	// Clock paces the wait for killed processes; the real clock if nil.
	Clock clock.Clock
	// PSI has the statistics carry pressure stall information on cgroup v2 (upstream's KubeletPSI gate,
	// on by default in 1.35); cgroup v1 has none.
	PSI bool
}

// deps are the host operations the Manager uses, replaced in tests.
type deps struct {
	systemdRunning func() bool
	kill           func(pid int) error
	access         func(dir string) error
	// newApplier, when set, replaces the applier chosen by root and
	// driver.
	newApplier func(l layout, hugeSizes []int64) applier
}

func hostDeps() deps {
	return deps{
		systemdRunning: systemd.IsRunningSystemd,
		kill:           func(pid int) error { return unix.Kill(pid, unix.SIGKILL) },
		access:         func(dir string) error { return unix.Access(dir, unix.W_OK) },
	}
}

// Manager owns the pods cgroup, the QoS cgroups and the pod cgroups. It is
// safe for concurrent use; calls for the same pod must not overlap (the
// sync loop's one worker per pod gives that).
type Manager struct {
	cfg         Config
	layout      layout
	apply       applier
	deps        deps
	podsName    cgroupName
	hugeSizes   []int64
	allocatable v1.ResourceList

	mu      sync.Mutex
	started bool
	pods    map[types.UID]trackedPod
	scans   int // CleanupOrphans calls so far
}

// trackedPod is what the QoS cgroups need to know of a pod.
type trackedPod struct {
	qos      v1.PodQOSClass
	milliCPU int64
}

// New checks the configuration against the host and returns a Manager. It
// detects the hierarchy layout and the controllers, and fails with one
// error (ErrConfig or ErrHostUnsupported) when they do not fit: no
// hierarchy, a required controller missing, or the systemd driver without
// systemd as PID 1. It creates nothing; Start does.
func New(cfg Config) (*Manager, error) {
	return newManager(cfg, hostDeps())
}

func newManager(cfg Config, d deps) (*Manager, error) {
	if cfg.Root == "" {
		cfg.Root = HostRoot
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = DefaultCgroupRoot
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	driver, err := ParseDriver(string(cfg.Driver))
	if err != nil {
		return nil, err
	}
	cfg.Driver = driver
	podsName, err := parseCgroupfsName(cfg.CgroupRoot)
	if err != nil || len(podsName) == 0 {
		return nil, fmt.Errorf("%w: cgroup root %q: must be an absolute path below the hierarchy root", ErrConfig, cfg.CgroupRoot)
	}
	if driver == DriverSystemd {
		if !d.systemdRunning() {
			return nil, fmt.Errorf("%w: cgroup driver %q needs systemd as PID 1 (no /run/systemd/system); use --cgroup-driver=%s",
				ErrHostUnsupported, driver, DriverCgroupfs)
		}
		if d.newApplier == nil && cfg.Root != HostRoot {
			return nil, fmt.Errorf("%w: cgroup driver %q manages only %s, not %s", ErrConfig, driver, HostRoot, cfg.Root)
		}
	}
	mode, err := DetectMode(cfg.Root)
	if err != nil {
		return nil, err
	}
	controllers, err := detectControllers(cfg.Root, mode)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:      cfg,
		layout:   layout{root: cfg.Root, mode: mode, driver: driver, controllers: controllers},
		deps:     d,
		podsName: podsName,
		pods:     map[types.UID]trackedPod{},
	}
	if slices.Contains(controllers, "hugetlb") {
		if m.hugeSizes, err = hugePageSizes(cfg.HugePageSizes); err != nil {
			return nil, err
		}
	}
	if m.allocatable, err = m.nodeAllocatable(); err != nil {
		return nil, err
	}
	switch {
	case d.newApplier != nil:
		m.apply = d.newApplier(m.layout, m.hugeSizes)
	case cfg.Root == HostRoot:
		m.apply = libApplier{mode: mode, driver: driver, hugeSizes: m.hugeSizes}
	default:
		m.apply = fileApplier{layout: m.layout, hugeSizes: m.hugeSizes}
	}
	return m, nil
}

// hugePageSizes returns the configured sizes, or the host's.
func hugePageSizes(configured []int64) ([]int64, error) {
	if configured != nil {
		return slices.Clone(configured), nil
	}
	var out []int64
	for _, name := range cgroups.HugePageSizes() {
		size, err := parseHugePageSizeName(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrHostUnsupported, err)
		}
		out = append(out, size)
	}
	return out, nil
}

func (m *Manager) nodeAllocatable() (v1.ResourceList, error) {
	capacity := m.cfg.Capacity
	if capacity == nil {
		var err error
		if capacity, err = MachineCapacity(m.cfg.ProcRoot); err != nil {
			return nil, fmt.Errorf("node capacity: %w", err)
		}
	}
	for _, list := range []v1.ResourceList{m.cfg.KubeReserved, m.cfg.SystemReserved, m.cfg.EvictionHard} {
		for name, q := range list {
			if q.Sign() < 0 {
				return nil, fmt.Errorf("%w: reserved %s %s must not be negative", ErrConfig, name, q.String())
			}
		}
	}
	alloc := NodeAllocatable(capacity, m.cfg.KubeReserved, m.cfg.SystemReserved, m.cfg.EvictionHard)
	if q, ok := alloc[v1.ResourceMemory]; ok && q.Sign() <= 0 {
		return nil, fmt.Errorf("%w: reservations and eviction threshold leave no memory for pods (capacity %s)",
			ErrConfig, capacity.Memory().String())
	}
	return alloc, nil
}

// Mode returns the detected hierarchy layout.
func (m *Manager) Mode() Mode { return m.layout.mode }

// Driver returns the cgroup driver in use.
func (m *Manager) Driver() Driver { return m.layout.driver }

// Allocatable returns what the pods cgroup is sized to.
func (m *Manager) Allocatable() v1.ResourceList { return m.allocatable.DeepCopy() }

// Start creates the pods cgroup, sized to node allocatable, and the
// Burstable and BestEffort cgroups, or brings existing ones to these
// settings. It checks first that every hierarchy can be written
// (ErrNotWritable), and removes what it created when a later step fails,
// so a failed Start leaves no half-built tree.
func (m *Manager) Start(ctx context.Context) (retErr error) {
	logger := klog.FromContext(ctx)
	logger.Info("Detected cgroup hierarchy", "mode", m.layout.mode.String(), "driver", string(m.layout.driver),
		"root", m.cfg.Root, "controllers", m.layout.controllers)
	var dirs []string
	for _, d := range m.layout.hierarchies() {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	if err := checkWritable(dirs, m.deps.access); err != nil {
		return err
	}

	m.mu.Lock()
	burstableMilliCPU := m.burstableMilliCPU()
	m.mu.Unlock()
	burstable, bestEffort := qosCgroupConfigs(burstableMilliCPU, m.hugeSizes)
	tree := []cgroupSpec{
		m.spec(m.podsName, podsCgroupConfig(m.allocatable)),
		m.spec(qosName(m.podsName, v1.PodQOSBurstable), burstable),
		m.spec(qosName(m.podsName, v1.PodQOSBestEffort), bestEffort),
	}
	var made []cgroupSpec
	defer func() {
		if retErr == nil {
			return
		}
		for _, c := range slices.Backward(made) {
			if err := m.apply.destroy(c); err != nil {
				logger.Error(err, "Failed to remove cgroup after failed start", "cgroup", m.layout.parent(c.name))
			}
		}
	}()
	for _, c := range tree {
		existed := m.layout.exists(c.name)
		if !existed {
			made = append(made, c)
		}
		if err := m.apply.create(c); err != nil {
			return fmt.Errorf("create cgroup %s: %w", m.layout.rel(c.name), classify(err))
		}
		if err := m.cloneCpusets(c.name); err != nil {
			return fmt.Errorf("cgroup %s: %w", m.layout.rel(c.name), classify(err))
		}
	}
	m.mu.Lock()
	m.started = true
	m.mu.Unlock()
	logger.Info("Created QoS cgroups", "cgroupRoot", m.layout.parent(m.podsName),
		"cpu", m.allocatable.Cpu().String(), "memory", m.allocatable.Memory().String())
	return nil
}

// cloneCpusets has the kernel give every cpuset cgroup made in n its
// parent's CPUs and memory nodes as it makes it (cgroup v1's
// cgroup.clone_children, which new children inherit; it is set on the pods
// and QoS cgroups at every start, for trees made before). Otherwise
// whoever makes a cgroup there (this manager for pod cgroups, the runtime
// for every container) copies them by writing cpuset.cpus, and on v1 each
// such write rebuilds the kernel's scheduling domains under a host-wide
// lock, walking every cpuset cgroup: a tenth of the kubelet's and runc's
// CPU time while 30 pods start on a 2-core host. The copies are the same
// either way. v2 has no such flag and needs none: an empty cpuset.cpus
// there means the parent's.
func (m *Manager) cloneCpusets(n cgroupName) error {
	if m.layout.mode.unified() || !slices.Contains(m.layout.controllers, "cpuset") {
		return nil
	}
	return writeFile(m.layout.dir(n, "cpuset"), "cgroup.clone_children", "1")
}

// classify marks permission and read-only errors as ErrNotWritable.
func classify(err error) error {
	if errors.Is(err, syscall.EROFS) || errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: %w", ErrNotWritable, err)
	}
	return err
}

func (m *Manager) spec(n cgroupName, rc *ResourceConfig) cgroupSpec {
	return cgroupSpec{name: n, paths: m.layout.paths(n), res: rc}
}

func (m *Manager) isStarted() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started
}

// burstableMilliCPU sums the CPU requests of the Burstable pods; m.mu is
// held.
func (m *Manager) burstableMilliCPU() int64 {
	var sum int64
	for _, p := range m.pods {
		if p.qos == v1.PodQOSBurstable {
			sum += p.milliCPU
		}
	}
	return sum
}

// setTracked records (or, with ok false, forgets) a pod and brings the
// Burstable cgroup's CPU shares up to date when its sum changed.
func (m *Manager) setTracked(uid types.UID, p trackedPod, ok bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	before := m.burstableMilliCPU()
	prev, had := m.pods[uid]
	if ok {
		m.pods[uid] = p
	} else {
		delete(m.pods, uid)
	}
	after := m.burstableMilliCPU()
	if podfacts.MilliCPUToShares(before) == podfacts.MilliCPUToShares(after) {
		return nil
	}
	shares := podfacts.MilliCPUToShares(after)
	err := m.apply.update(m.spec(qosName(m.podsName, v1.PodQOSBurstable), &ResourceConfig{CPUShares: &shares}))
	if err != nil {
		if had {
			m.pods[uid] = prev
		} else {
			delete(m.pods, uid)
		}
		return fmt.Errorf("update burstable cgroup: %w", err)
	}
	return nil
}
