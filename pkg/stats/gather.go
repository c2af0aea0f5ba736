package stats

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/kubelet/pkg/cgroups"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// gathering is one pass over the node and its pods.
type gathering struct {
	c        *Collector
	ctx      context.Context
	now      time.Time
	failures int
	seen     map[string]bool // CPU samples taken, so that those of gone cgroups are dropped
	livePIDs map[types.UID]bool
	imageFs  *statsapi.FsStats
	nodeFs   *statsapi.FsStats
	mount    string // the image filesystem's mount point
	pods     []Pod  // the pods gathered, in the summary's order
	measure  bool   // the directories are measured this time
}

func (g *gathering) summary() *statsapi.Summary {
	c := g.c
	g.seen, g.livePIDs = map[string]bool{}, map[types.UID]bool{}
	g.measure = g.now.Sub(c.fsAt) >= c.cfg.FSInterval
	if g.measure {
		c.fsAt = g.now
	}
	pods := c.cfg.Pods()
	if c.cfg.Layers != nil {
		g.measureLayers(pods)
	}
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	g.pods = pods
	sum := &statsapi.Summary{Node: g.node(), Pods: make([]statsapi.PodStats, 0, len(pods))}
	live := map[types.UID]bool{}
	for i := range pods {
		live[pods[i].UID] = true
		sum.Pods = append(sum.Pods, g.pod(&pods[i]))
	}
	for key := range c.prev {
		if !g.seen[key] {
			delete(c.prev, key)
		}
	}
	for uid := range c.fs {
		if !live[uid] {
			delete(c.fs, uid)
		}
	}
	for uid := range c.pids {
		if !g.livePIDs[uid] {
			delete(c.pids, uid)
		}
	}
	return sum
}

// measureLayers measures every container's writable layer when the directories are due, else those of
// containers never measured (new ones), keeping the others' last measurement.
func (g *gathering) measureLayers(pods []Pod) {
	c := g.c
	var ids []string
	if !g.measure {
		for _, p := range pods {
			for _, ctr := range p.Containers {
				if _, ok := c.layers[ctr.ID]; !ok {
					ids = append(ids, ctr.ID)
				}
			}
		}
		if len(ids) == 0 {
			return
		}
	}
	l, err := c.cfg.Layers(g.ctx, ids)
	if err != nil {
		g.failures++
		return
	}
	if g.measure || c.layers == nil {
		c.layers = l
		return
	}
	for id, u := range l {
		c.layers[id] = u
	}
}

func (g *gathering) cpu(key string, st cgroups.Stats) *statsapi.CPUStats {
	g.seen[key] = true
	return &statsapi.CPUStats{Time: mtime(g.now), UsageCoreNanoSeconds: ptr(st.CPUUsageNanos),
		UsageNanoCores: g.c.rate(key, g.now, st.CPUUsageNanos), PSI: psi(st.Pressure.CPU)}
}

// io is a cgroup's IO statistics: its IO pressure, where the kernel gives it (cgroup v2), as upstream's
// summary has nothing else under io.
func (g *gathering) io(st cgroups.Stats) *statsapi.IOStats {
	if st.Pressure.IO == nil {
		return nil
	}
	return &statsapi.IOStats{Time: mtime(g.now), PSI: psi(st.Pressure.IO)}
}

// psi is pressure stall information as the summary API carries it (Total in the kernel's microseconds, as
// upstream's kubelet passes it on).
func psi(p *cgroups.PSI) *statsapi.PSIStats {
	if p == nil {
		return nil
	}
	data := func(d cgroups.PSIData) statsapi.PSIData {
		return statsapi.PSIData{Total: d.Total, Avg10: d.Avg10, Avg60: d.Avg60, Avg300: d.Avg300}
	}
	return &statsapi.PSIStats{Some: data(p.Some), Full: data(p.Full)}
}

func (g *gathering) memory(st cgroups.Stats, limit uint64) *statsapi.MemoryStats {
	m := &statsapi.MemoryStats{Time: mtime(g.now), UsageBytes: ptr(st.MemoryUsageBytes), WorkingSetBytes: ptr(st.MemoryWorkingSetBytes),
		RSSBytes: ptr(st.MemoryRSSBytes), PageFaults: ptr(st.PageFaults), MajorPageFaults: ptr(st.MajorPageFaults),
		PSI: psi(st.Pressure.Memory)}
	if limit > 0 {
		avail := uint64(0)
		if limit > st.MemoryWorkingSetBytes {
			avail = limit - st.MemoryWorkingSetBytes
		}
		m.AvailableBytes = &avail
	}
	return m
}

func (g *gathering) node() statsapi.NodeStats {
	c := g.c
	n := statsapi.NodeStats{NodeName: c.cfg.NodeName, StartTime: mtime(c.cfg.BootTime)}
	if st, err := c.cfg.Cgroups.NodeStats(g.ctx); err == nil {
		n.CPU = g.cpu("node", st)
		n.Memory = g.memory(st, memTotal(c.cfg.ProcRoot))
		n.IO = g.io(st)
		n.Rlimit = &statsapi.RlimitStats{Time: mtime(g.now), NumOfRunningProcesses: ptr(int64(st.Processes))}
		if max, err := readInt(filepath.Join(c.cfg.ProcRoot, "sys/kernel/pid_max")); err == nil {
			n.Rlimit.MaxPID = &max
		}
	} else {
		g.failures++
	}
	if st, err := c.cfg.Cgroups.PodsStats(g.ctx); err == nil {
		n.SystemContainers = append(n.SystemContainers, statsapi.ContainerStats{Name: statsapi.SystemContainerPods,
			StartTime: mtime(c.cfg.BootTime), CPU: g.cpu("pods", st), Memory: g.memory(st, c.podsMemory()), IO: g.io(st)})
	} else {
		g.failures++
	}
	if ifs, err := readNetDev(filepath.Join(c.cfg.ProcRoot, "net/dev")); err == nil {
		n.Network = network(g.now, ifs)
	} else {
		g.failures++
	}
	if c.cfg.RootDir != "" {
		if fs, err := statFS(c.cfg.RootDir, g.now); err == nil {
			n.Fs, g.nodeFs = fs, fs
		} else {
			g.failures++
		}
	}
	if c.cfg.ImageFs != nil {
		if u, mount, err := c.cfg.ImageFs(g.ctx); err == nil {
			fs, err := statFS(mount, g.now)
			if err != nil {
				fs = &statsapi.FsStats{Time: mtime(g.now)}
			}
			fs.UsedBytes, fs.InodesUsed = ptr(uint64(max(u.Bytes, 0))), ptr(uint64(max(u.Inodes, 0)))
			n.Runtime = &statsapi.RuntimeStats{ImageFs: fs, ContainerFs: fs}
			g.imageFs, g.mount = fs, mount
		} else {
			g.failures++
		}
	}
	return n
}

func (g *gathering) pod(p *Pod) statsapi.PodStats {
	c := g.c
	ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
		StartTime: mtime(p.StartTime), Containers: []statsapi.ContainerStats{}}
	if st, err := c.cfg.Cgroups.PodStats(g.ctx, p.UID); err == nil {
		ps.CPU = g.cpu("pod/"+string(p.UID), st)
		ps.Memory = g.memory(st, 0)
		ps.IO = g.io(st)
		ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: ptr(st.Processes)}
	} else {
		g.failures++
	}
	ids := make([]string, 0, len(p.Containers))
	for _, ctr := range p.Containers {
		ids = append(ids, ctr.ID)
	}
	byID, err := c.cfg.Cgroups.ContainersStats(g.ctx, p.UID, ids)
	if err != nil {
		g.failures++
	}
	fs := g.podFS(p)
	var ephemeral volume.Usage
	for _, ctr := range p.Containers {
		cs := statsapi.ContainerStats{Name: ctr.Name, StartTime: mtime(ctr.StartTime)}
		if st, ok := byID[ctr.ID]; ok {
			cs.CPU = g.cpu("ctr/"+ctr.ID, st)
			cs.Memory = g.memory(st, 0)
			cs.IO = g.io(st)
		}
		if u, ok := c.layers[ctr.ID]; ok {
			cs.Rootfs = g.fsOf(u, g.imageFs)
			ephemeral = add(ephemeral, u)
		}
		if u, ok := fs.logs[ctr.Name]; ok {
			cs.Logs = g.fsOf(u, g.nodeFs)
			ephemeral = add(ephemeral, u)
		}
		ps.Containers = append(ps.Containers, cs)
	}
	for _, name := range sortedKeys(fs.volumes) {
		u := fs.volumes[name]
		vs := statsapi.VolumeStats{Name: name, FsStats: statsapi.FsStats{Time: mtime(fs.at),
			UsedBytes: ptr(uint64(max(u.Bytes, 0))), InodesUsed: ptr(uint64(max(u.Inodes, 0)))}}
		info := p.Volumes[name]
		if info.Claim != "" {
			vs.PVCRef = &statsapi.PVCReference{Name: info.Claim, Namespace: p.Namespace}
		}
		if info.Ephemeral {
			ephemeral = add(ephemeral, u)
		}
		ps.VolumeStats = append(ps.VolumeStats, vs)
	}
	for _, name := range sortedKeys(fs.csi) {
		u := fs.csi[name]
		vs := statsapi.VolumeStats{Name: name, FsStats: statsapi.FsStats{Time: mtime(fs.at),
			UsedBytes: ptr(uint64(max(u.Used, 0))), CapacityBytes: ptr(uint64(max(u.Capacity, 0))), AvailableBytes: ptr(uint64(max(u.Available, 0))),
			InodesUsed: ptr(uint64(max(u.InodesUsed, 0))), Inodes: ptr(uint64(max(u.Inodes, 0))), InodesFree: ptr(uint64(max(u.InodesAvailable, 0)))}}
		if claim := p.Volumes[name].Claim; claim != "" {
			vs.PVCRef = &statsapi.PVCReference{Name: claim, Namespace: p.Namespace}
		}
		if u.Abnormal != nil {
			vs.VolumeHealthStats = &statsapi.VolumeHealthStats{Abnormal: *u.Abnormal}
		}
		ps.VolumeStats = append(ps.VolumeStats, vs)
	}
	if !fs.at.IsZero() {
		ps.EphemeralStorage = g.fsOf(ephemeral, g.nodeFs)
	}
	if !p.HostNetwork {
		if pid := g.podPID(p.UID); pid > 0 {
			if ifs, err := readNetDev(filepath.Join(c.cfg.ProcRoot, itoa(pid), "net/dev")); err == nil {
				ps.Network = network(g.now, ifs)
			}
		}
	}
	return ps
}

// podProcess is a process of a pod, and the network namespace it was in when found.
type podProcess struct {
	pid   int
	netns string
}

// podPID returns a process in the pod's network namespace: the one found before while it is still in that
// namespace (one readlink), else one found in the pod's cgroup.
func (g *gathering) podPID(uid types.UID) int {
	c := g.c
	g.livePIDs[uid] = true
	if pp, ok := c.pids[uid]; ok {
		if ns, err := os.Readlink(filepath.Join(c.cfg.ProcRoot, itoa(pp.pid), "ns/net")); err == nil && ns == pp.netns {
			return pp.pid
		}
	}
	pid, err := c.cfg.Cgroups.PodPID(uid)
	if err != nil || pid <= 0 {
		delete(c.pids, uid)
		return 0
	}
	ns, err := os.Readlink(filepath.Join(c.cfg.ProcRoot, itoa(pid), "ns/net"))
	if err != nil {
		return 0
	}
	c.pids[uid] = podProcess{pid: pid, netns: ns}
	return pid
}

// podFS measures the pod's logs and volumes when due (or never measured), else returns the last measurement.
func (g *gathering) podFS(p *Pod) podFS {
	c := g.c
	last, ok := c.fs[p.UID]
	if ok && !g.measure {
		return last
	}
	fs := podFS{at: g.now, logs: map[string]volume.Usage{}}
	dir := volume.PodLogDir(c.cfg.LogsDir, p.Namespace, p.Name, p.UID)
	for _, ctr := range p.Containers {
		if u, err := volume.DirUsage(filepath.Join(dir, ctr.Name)); err == nil {
			fs.logs[ctr.Name] = u
		}
	}
	if c.cfg.Volumes != nil {
		if v, err := c.cfg.Volumes(p.UID); err == nil {
			fs.volumes = v
		} else {
			g.failures++
		}
	}
	if c.cfg.CSIVolumes != nil {
		v, err := c.cfg.CSIVolumes(g.ctx, p.UID)
		if err != nil {
			g.failures++
		}
		fs.csi = v
		if c.cfg.VolumeAbnormal != nil {
			for _, name := range sortedKeys(v) {
				if a := v[name].Abnormal; a != nil && *a {
					c.cfg.VolumeAbnormal(*p, name, v[name].Message)
				}
			}
		}
	}
	c.fs[p.UID] = fs
	return fs
}

// fsOf is usage on a filesystem, with the filesystem's capacity and what is available on it.
func (g *gathering) fsOf(u volume.Usage, on *statsapi.FsStats) *statsapi.FsStats {
	fs := &statsapi.FsStats{Time: mtime(g.now), UsedBytes: ptr(uint64(max(u.Bytes, 0))), InodesUsed: ptr(uint64(max(u.Inodes, 0)))}
	if on != nil {
		fs.CapacityBytes, fs.AvailableBytes, fs.Inodes, fs.InodesFree = on.CapacityBytes, on.AvailableBytes, on.Inodes, on.InodesFree
	}
	return fs
}

func add(a, b volume.Usage) volume.Usage {
	return volume.Usage{Bytes: a.Bytes + b.Bytes, Inodes: a.Inodes + b.Inodes}
}

// statFS is the filesystem holding path: capacity, available, used and inodes.
func statFS(path string, now time.Time) (*statsapi.FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, err
	}
	bs := uint64(st.Bsize)
	capacity, avail := st.Blocks*bs, st.Bavail*bs
	return &statsapi.FsStats{Time: mtime(now), CapacityBytes: ptr(capacity), AvailableBytes: ptr(avail),
		UsedBytes: ptr((st.Blocks - st.Bfree) * bs), Inodes: ptr(st.Files), InodesFree: ptr(st.Ffree),
		InodesUsed: ptr(st.Files - st.Ffree)}, nil
}
