package runtime

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1stats "github.com/containerd/cgroups/v3/cgroup1/stats"
	v2stats "github.com/containerd/cgroups/v3/cgroup2/stats"
	"github.com/containerd/typeurl/v2"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/runtime/crimetrics"
)

// ListMetricDescriptors describes the series ListPodSandboxMetrics reports (pkg/runtime/crimetrics): cAdvisor's
// container_* series as containerd's CRI plugin names them, for a kubelet that reads pod metrics from its
// runtime (PodAndContainerStatsFromCRI).
func (r *Runtime) ListMetricDescriptors(context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	return crimetrics.Descriptors(), nil
}

// ListPodSandboxMetrics reports every ready sandbox's network series and its running containers' series: CPU,
// memory, block I/O from the task's cgroup; processes, threads and open files from /proc; the writable
// layer on the runtime's filesystem; the resources in the container's spec. A container or sandbox whose
// values cannot be read (it is going away) is left out; the call fails only when the runtime cannot list.
func (r *Runtime) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	sandboxes, err := r.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, err
	}
	ctrs, err := r.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, err
	}
	byPod := map[string][]*runtimeapi.Container{}
	for _, c := range ctrs {
		byPod[c.PodSandboxId] = append(byPod[c.PodSandboxId], c)
	}
	ctx = r.ns(ctx)
	now := r.clock.Now().UnixNano()
	fs := r.imageFilesystem()
	out := make([]*runtimeapi.PodSandboxMetrics, 0, len(sandboxes))
	for _, sb := range sandboxes {
		labels := crimetrics.Labels{Pod: sb.GetMetadata().GetName(), Namespace: sb.GetMetadata().GetNamespace(), ID: sb.Id}
		var cms []*runtimeapi.ContainerMetrics
		for _, c := range byPod[sb.Id] {
			l := labels
			l.Container, l.ID, l.Image = c.GetMetadata().GetName(), c.Id, c.GetImage().GetImage()
			s, err := r.containerSample(ctx, c.Id, l, now, fs)
			if err != nil {
				logger(ctx).V(4).Info("No metrics for a container", "container", c.Id, "err", err)
				continue
			}
			cms = append(cms, crimetrics.ContainerMetrics(s))
		}
		var nets []crimetrics.Network
		if pid, ok := r.procs.alivePID(sb.Id); ok {
			if n, err := readNetDev(filepath.Join("/proc", strconv.Itoa(pid), "net", "dev"), "eth0"); err == nil {
				nets = append(nets, n)
			}
		}
		out = append(out, crimetrics.SandboxMetrics(labels, now, nets, cms))
	}
	return out, nil
}

// imageFilesystem is the runtime's filesystem (where writable layers are), for the container_fs_* series.
func (r *Runtime) imageFilesystem() crimetrics.Filesystem {
	fs := crimetrics.Filesystem{Device: r.cfg.ImageFsDir}
	var st unix.Statfs_t
	if unix.Statfs(r.cfg.ImageFsDir, &st) == nil {
		fs.Limit = st.Blocks * uint64(st.Bsize)
		fs.InodesTotal, fs.InodesFree = st.Files, st.Ffree
	}
	return fs
}

// containerSample gathers one running container's values.
func (r *Runtime) containerSample(ctx context.Context, id string, l crimetrics.Labels, now int64, fs crimetrics.Filesystem) (crimetrics.Sample, error) {
	s := crimetrics.Sample{Labels: l, Timestamp: now, FS: fs}
	rec, err := r.client.ContainerService().Get(ctx, id)
	if err != nil {
		return s, err
	}
	s.StartedAt = labelInt64(rec.Labels, labelStartedAt)
	if rec.SnapshotKey != "" {
		if u, err := r.client.SnapshotService(rec.Snapshotter).Usage(ctx, rec.SnapshotKey); err == nil {
			s.FS.Usage = uint64(max(u.Size, 0))
		}
	}
	if rec.Spec != nil {
		if v, err := typeurl.UnmarshalAny(rec.Spec); err == nil {
			if spec, ok := v.(*runtimespec.Spec); ok {
				s.Spec = specValues(spec)
			}
		}
	}
	task, v, err := r.taskMetrics(ctx, id)
	if err != nil {
		return s, err
	}
	switch st := v.(type) {
	case *v1stats.Metrics:
		cgroupV1Sample(&s, st)
	case *v2stats.Metrics:
		cgroupV2Sample(&s, st)
	}
	if pids, err := task.Pids(ctx); err == nil {
		for _, p := range pids {
			processSample(&s.Processes, int(p.Pid))
		}
	}
	return s, nil
}

func specValues(spec *runtimespec.Spec) crimetrics.Spec {
	var out crimetrics.Spec
	if spec.Linux == nil || spec.Linux.Resources == nil {
		return out
	}
	if c := spec.Linux.Resources.CPU; c != nil {
		if c.Period != nil {
			out.CPUPeriod = *c.Period
		}
		if c.Shares != nil {
			out.CPUShares = *c.Shares
		}
	}
	if m := spec.Linux.Resources.Memory; m != nil {
		if m.Limit != nil && *m.Limit > 0 {
			out.MemoryLimit = uint64(*m.Limit)
		}
		if m.Swap != nil && *m.Swap > 0 {
			out.MemorySwapLimit = uint64(*m.Swap)
		}
	}
	return out
}

func cgroupV1Sample(s *crimetrics.Sample, st *v1stats.Metrics) {
	if c := st.GetCPU(); c != nil {
		s.CPU = crimetrics.CPU{Total: c.GetUsage().GetTotal(), User: c.GetUsage().GetUser(), System: c.GetUsage().GetKernel(),
			Periods: c.GetThrottling().GetPeriods(), ThrottledPeriods: c.GetThrottling().GetThrottledPeriods(),
			ThrottledNanos: c.GetThrottling().GetThrottledTime()}
	}
	if m := st.GetMemory(); m != nil {
		usage := m.GetUsage().GetUsage()
		s.Memory = crimetrics.Memory{Cache: m.GetTotalCache(), RSS: m.GetTotalRSS(), Kernel: m.GetKernel().GetUsage(),
			MappedFile: m.GetTotalMappedFile(), Swap: m.GetSwap().GetUsage(), Usage: usage, MaxUsage: m.GetUsage().GetMax(),
			WorkingSet: usage - min(usage, m.GetTotalInactiveFile()), ActiveFile: m.GetTotalActiveFile(),
			InactiveFile: m.GetTotalInactiveFile(), Failcnt: m.GetUsage().GetFailcnt(), PgFault: m.GetTotalPgFault(),
			PgMajFault: m.GetTotalPgMajFault(), OOMEvents: st.GetMemoryOomControl().GetOomKill()}
	}
	if p := st.GetPids(); p != nil {
		s.Processes.ThreadsMax = p.GetLimit()
	}
	devices := map[[2]uint64]*crimetrics.BlockIO{}
	entry := func(e *v1stats.BlkIOEntry) *crimetrics.BlockIO {
		k := [2]uint64{e.GetMajor(), e.GetMinor()}
		if devices[k] == nil {
			devices[k] = &crimetrics.BlockIO{Device: blockDeviceName(e.GetDevice(), e.GetMajor(), e.GetMinor()), Major: e.GetMajor(), Minor: e.GetMinor()}
		}
		return devices[k]
	}
	for _, e := range st.GetBlkio().GetIoServiceBytesRecursive() {
		switch strings.ToLower(e.GetOp()) {
		case "read":
			entry(e).ReadBytes = e.GetValue()
		case "write":
			entry(e).WriteBytes = e.GetValue()
		}
	}
	for _, e := range st.GetBlkio().GetIoServicedRecursive() {
		switch strings.ToLower(e.GetOp()) {
		case "read":
			entry(e).Reads = e.GetValue()
		case "write":
			entry(e).Writes = e.GetValue()
		}
	}
	for _, d := range devices {
		s.BlockIO = append(s.BlockIO, *d)
	}
}

func cgroupV2Sample(s *crimetrics.Sample, st *v2stats.Metrics) {
	if c := st.GetCPU(); c != nil {
		s.CPU = crimetrics.CPU{Total: c.GetUsageUsec() * 1000, User: c.GetUserUsec() * 1000, System: c.GetSystemUsec() * 1000,
			Periods: c.GetNrPeriods(), ThrottledPeriods: c.GetNrThrottled(), ThrottledNanos: c.GetThrottledUsec() * 1000}
	}
	if m := st.GetMemory(); m != nil {
		usage := m.GetUsage()
		s.Memory = crimetrics.Memory{Cache: m.GetFile(), RSS: m.GetAnon(), Kernel: m.GetKernelStack() + m.GetSlab() + m.GetSock(),
			MappedFile: m.GetFileMapped(), Swap: m.GetSwapUsage(), Usage: usage, MaxUsage: m.GetMaxUsage(),
			WorkingSet: usage - min(usage, m.GetInactiveFile()), ActiveFile: m.GetActiveFile(), InactiveFile: m.GetInactiveFile(),
			PgFault: m.GetPgfault(), PgMajFault: m.GetPgmajfault(), OOMEvents: st.GetMemoryEvents().GetOomKill(),
			Failcnt: st.GetMemoryEvents().GetMax()}
	}
	if p := st.GetPids(); p != nil {
		s.Processes.ThreadsMax = p.GetLimit()
	}
	for _, e := range st.GetIo().GetUsage() {
		s.BlockIO = append(s.BlockIO, crimetrics.BlockIO{Device: blockDeviceName("", e.GetMajor(), e.GetMinor()),
			Major: e.GetMajor(), Minor: e.GetMinor(), ReadBytes: e.GetRbytes(), WriteBytes: e.GetWbytes(),
			Reads: e.GetRios(), Writes: e.GetWios()})
	}
}

// blockDeviceName is the device's name as the cgroup gave it, else its /dev path from sysfs, else major:minor.
func blockDeviceName(name string, major, minor uint64) string {
	if name != "" {
		return name
	}
	if link, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)); err == nil {
		return "/dev/" + filepath.Base(link)
	}
	return fmt.Sprintf("%d:%d", major, minor)
}

// processSample counts a process of the container: it, its threads, its open files and sockets. A process
// that is gone meanwhile counts as nothing.
func processSample(p *crimetrics.Processes, pid int) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return
	}
	p.Processes++
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			if n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64); err == nil {
				p.Threads += n
			}
		}
	}
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return
	}
	p.FileDescriptors += uint64(len(fds))
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			p.Sockets++
		}
	}
}

// readNetDev reads one interface's counters from a /proc/<pid>/net/dev file (the namespace of that process).
func readNetDev(path, iface string) (crimetrics.Network, error) {
	f, err := os.Open(path)
	if err != nil {
		return crimetrics.Network{}, err
	}
	defer f.Close()
	return parseNetDev(f, iface)
}

// parseNetDev finds iface's line in the net/dev format: receive bytes, packets, errs, drop, then four more,
// then transmit bytes, packets, errs, drop.
func parseNetDev(r io.Reader, iface string) (crimetrics.Network, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) != iface {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 12 {
			return crimetrics.Network{}, fmt.Errorf("net/dev line of %s has %d fields", iface, len(f))
		}
		v := make([]uint64, 12)
		for i := range v {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return crimetrics.Network{}, fmt.Errorf("net/dev line of %s: %w", iface, err)
			}
			v[i] = n
		}
		return crimetrics.Network{Interface: iface, RxBytes: v[0], RxPackets: v[1], RxErrors: v[2], RxDropped: v[3],
			TxBytes: v[8], TxPackets: v[9], TxErrors: v[10], TxDropped: v[11]}, nil
	}
	if err := sc.Err(); err != nil {
		return crimetrics.Network{}, err
	}
	return crimetrics.Network{}, fmt.Errorf("no interface %s", iface)
}
