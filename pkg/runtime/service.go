package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	v1stats "github.com/containerd/cgroups/v3/cgroup1/stats"
	v2stats "github.com/containerd/cgroups/v3/cgroup2/stats"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/cni"
	"github.com/nodeagent/kubelet/pkg/logd"
	"github.com/nodeagent/kubelet/pkg/runtime/specopts"
)

var (
	_ cri.RuntimeService      = (*Runtime)(nil)
	_ cri.ImageManagerService = (*Runtime)(nil)
)

// urlServer hands out URLs for the CRI streaming calls; k8s.io/kubelet/pkg/cri/streaming.Server is one.
type urlServer interface {
	GetExec(*runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	GetAttach(*runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	GetPortForward(*runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

var streamMu sync.RWMutex

// SetStreamServer sets the server that serves Exec, Attach and PortForward URLs (a CRI streaming server
// wrapping Streamer). Without one, those calls answer Unimplemented; the kubelet's own endpoint calls
// Streamer directly.
func (r *Runtime) SetStreamServer(s urlServer) {
	streamMu.Lock()
	r.stream = s
	streamMu.Unlock()
}

func (r *Runtime) streamServer() (urlServer, error) {
	streamMu.RLock()
	defer streamMu.RUnlock()
	if r.stream == nil {
		return nil, status.Error(codes.Unimplemented, "no streaming server configured")
	}
	return r.stream, nil
}

// Version reports the runtime's name and version.
func (r *Runtime) Version(ctx context.Context, _ string) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0", // the kubelet-runtime API version, as CRI defines it
		RuntimeName:       Name,
		RuntimeVersion:    Version,
		RuntimeApiVersion: APIVersion,
	}, nil
}

// Status reports RuntimeReady (containerd answers) and NetworkReady (a CNI network is configured).
func (r *Runtime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	rt := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: true}
	if ok, err := r.client.IsServing(r.ns(ctx)); !ok {
		rt.Status, rt.Reason = false, "ContainerdNotServing"
		rt.Message = "containerd does not answer its health check"
		if err != nil {
			rt.Message += ": " + err.Error()
		}
	}
	nw := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if err := r.cfg.Network.Status(); err != nil {
		nw.Status, nw.Reason, nw.Message = false, "NetworkPluginNotReady", err.Error()
	}
	// The handler and its features, as containerd 2.x's CRI plugin reports them: this runtime has the
	// default one ("") only.
	userns, _ := r.userNamespaces(ctx)
	features := &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: specopts.RecursiveReadOnlySupported(), UserNamespaces: userns}
	// The runtime's own features, as containerd 2.x reports them: supplementalGroupsPolicy (Merge and Strict)
	// and the container's user in its status.
	return &runtimeapi.StatusResponse{
		Status:          &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{rt, nw}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: features}},
		Features:        &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
	}, nil
}

// UpdateRuntimeConfig takes the node's pod CIDRs: with a CNI configuration template, the pod network's
// configuration is written from it (as containerd's CRI plugin does with conf_template); without one, the
// CNI configuration on disk decides addressing and the CIDRs are only logged.
func (r *Runtime) UpdateRuntimeConfig(ctx context.Context, cfg *runtimeapi.RuntimeConfig) error {
	cidrs := cfg.GetNetworkConfig().GetPodCidr()
	if cidrs == "" {
		return nil
	}
	if r.cfg.CNIConfTemplate == "" {
		logger(ctx).V(2).Info("Pod CIDR given; the CNI configuration on disk decides addressing", "podCIDR", cidrs)
		return nil
	}
	changed, err := cni.RenderTemplate(r.cfg.CNIConfTemplate, r.cfg.CNIConfDir, cidrs)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	if changed {
		logger(ctx).Info("Wrote the pod network configuration from its template", "podCIDR", cidrs,
			"file", filepath.Join(r.cfg.CNIConfDir, cni.TemplateFile))
	}
	return nil
}

// RuntimeConfig reports the cgroup driver this runtime expects.
func (r *Runtime) RuntimeConfig(context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

// UpdateContainerResources changes a running container's CPU and memory limits.
func (r *Runtime) UpdateContainerResources(ctx context.Context, containerID string, res *runtimeapi.ContainerResources) error {
	ctx = r.ns(ctx)
	rec, err := r.findContainer(ctx, containerID, kindContainer)
	if err != nil {
		return fmt.Errorf("update container %q: %w", containerID, err)
	}
	cont, err := r.client.LoadContainer(ctx, rec.ID)
	if err != nil {
		return err
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		return fmt.Errorf("update container %q: not running: %w", containerID, err)
	}
	return task.Update(ctx, withLinuxResources(res.GetLinux()))
}

// Exec returns the URL of an exec session on the streaming server.
func (r *Runtime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	s, err := r.streamServer()
	if err != nil {
		return nil, err
	}
	return s.GetExec(req)
}

// Attach returns the URL of an attach session on the streaming server.
func (r *Runtime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	s, err := r.streamServer()
	if err != nil {
		return nil, err
	}
	return s.GetAttach(req)
}

// PortForward returns the URL of a port-forward session on the streaming server.
func (r *Runtime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	s, err := r.streamServer()
	if err != nil {
		return nil, err
	}
	return s.GetPortForward(req)
}

// ReopenContainerLog reopens a running container's log file after the caller rotated it.
func (r *Runtime) ReopenContainerLog(ctx context.Context, containerID string) error {
	ctx = r.ns(ctx)
	rec, err := r.findContainer(ctx, containerID, kindContainer)
	if err != nil {
		return fmt.Errorf("reopen log of %q: %w", containerID, err)
	}
	if err := r.logs.Reopen(ctx, rec.ID); err != nil {
		if logd.IsNotFound(err) {
			return fmt.Errorf("reopen log of %q: container is not running: %w", containerID, errdefs.ErrFailedPrecondition)
		}
		return fmt.Errorf("reopen log of %q: %w", containerID, err)
	}
	return nil
}

// LostLogLines returns, for each running container whose log lost lines (a full disk), how many so far.
func (r *Runtime) LostLogLines(ctx context.Context) (map[string]int, error) {
	return r.logs.Lost(ctx)
}

// CheckpointContainer is not supported.
func (r *Runtime) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) error {
	return status.Error(codes.Unimplemented, "checkpoint is not supported")
}

// UpdatePodSandboxResources is accepted: pod-level cgroups are the kubelet's.
func (r *Runtime) UpdatePodSandboxResources(context.Context, *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}

// ContainerStats returns a container's CPU and memory usage from its cgroup, and its writable layer's.
func (r *Runtime) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	ctx = r.ns(ctx)
	rec, err := r.findContainer(ctx, containerID, kindContainer)
	if err != nil {
		return nil, fmt.Errorf("stats of %q: %w", containerID, err)
	}
	return r.containerStats(ctx, rec.ID)
}

func (r *Runtime) containerStats(ctx context.Context, id string) (*runtimeapi.ContainerStats, error) {
	rec, err := r.client.ContainerService().Get(ctx, id)
	if err != nil {
		return nil, err
	}
	meta, err := decodeContainerMeta(rec)
	if err != nil {
		return nil, err
	}
	out := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{
		Id: id, Metadata: meta.Metadata, Labels: meta.Labels, Annotations: meta.Annotations,
	}}
	now := r.clock.Now().UnixNano()
	// The writable layer: what the container wrote to its root filesystem, as the snapshotter counts it
	// (containerd's CRI plugin reports the same), for the node's stats and for eviction.
	if rec.SnapshotKey != "" {
		if u, err := r.client.SnapshotService(rec.Snapshotter).Usage(ctx, rec.SnapshotKey); err == nil {
			out.WritableLayer = &runtimeapi.FilesystemUsage{
				Timestamp:  now,
				FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: r.cfg.ImageFsDir},
				UsedBytes:  &runtimeapi.UInt64Value{Value: uint64(max(u.Size, 0))},
				InodesUsed: &runtimeapi.UInt64Value{Value: uint64(max(u.Inodes, 0))},
			}
		}
	}
	_, v, err := r.taskMetrics(ctx, id)
	if err != nil {
		return out, nil
	}
	switch s := v.(type) {
	case *v1stats.Metrics:
		if s.CPU != nil && s.CPU.Usage != nil {
			out.Cpu = &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: s.CPU.Usage.Total}}
		}
		if s.Memory != nil && s.Memory.Usage != nil {
			ws := s.Memory.Usage.Usage
			if s.Memory.TotalInactiveFile < ws {
				ws -= s.Memory.TotalInactiveFile
			}
			out.Memory = &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws},
				RssBytes: &runtimeapi.UInt64Value{Value: s.Memory.TotalRSS}, UsageBytes: &runtimeapi.UInt64Value{Value: s.Memory.Usage.Usage}}
		}
	case *v2stats.Metrics:
		if s.CPU != nil {
			out.Cpu = &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: s.CPU.UsageUsec * 1000}}
		}
		if s.Memory != nil {
			ws := s.Memory.Usage
			if s.Memory.InactiveFile < ws {
				ws -= s.Memory.InactiveFile
			}
			out.Memory = &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws},
				RssBytes: &runtimeapi.UInt64Value{Value: s.Memory.Anon}, UsageBytes: &runtimeapi.UInt64Value{Value: s.Memory.Usage}}
		}
	}
	return out, nil
}

// taskMetrics returns the container's task and its cgroup's statistics (*v1stats.Metrics or *v2stats.Metrics).
func (r *Runtime) taskMetrics(ctx context.Context, id string) (containerd.Task, any, error) {
	cont, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	m, err := task.Metrics(ctx)
	if err != nil {
		return nil, nil, err
	}
	v, err := typeurl.UnmarshalAny(m.Data)
	return task, v, err
}

// ListContainerStats returns the stats of running containers matching the filter.
func (r *Runtime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	cf := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	if filter != nil {
		cf.Id, cf.PodSandboxId, cf.LabelSelector = filter.Id, filter.PodSandboxId, filter.LabelSelector
	}
	ctrs, err := r.ListContainers(ctx, cf)
	if err != nil {
		return nil, err
	}
	ctx = r.ns(ctx)
	var out []*runtimeapi.ContainerStats
	for _, c := range ctrs {
		s, err := r.containerStats(ctx, c.Id)
		if err != nil {
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// PodSandboxStats is served by the kubelet from pod cgroups; the runtime does not report it.
func (r *Runtime) PodSandboxStats(context.Context, string) (*runtimeapi.PodSandboxStats, error) {
	return nil, status.Error(codes.Unimplemented, "pod sandbox stats come from the kubelet's pod cgroups")
}

// ListPodSandboxStats is served by the kubelet from pod cgroups; the runtime does not report it.
func (r *Runtime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, status.Error(codes.Unimplemented, "pod sandbox stats come from the kubelet's pod cgroups")
}

// withLinuxResources turns CRI container resources into a task update.
func withLinuxResources(res *runtimeapi.LinuxContainerResources) containerd.UpdateTaskOpts {
	lr := &runtimespec.LinuxResources{CPU: &runtimespec.LinuxCPU{}, Memory: &runtimespec.LinuxMemory{}}
	if res != nil {
		if res.CpuShares > 0 {
			s := uint64(res.CpuShares)
			lr.CPU.Shares = &s
		}
		if res.CpuPeriod > 0 {
			p := uint64(res.CpuPeriod)
			lr.CPU.Period = &p
		}
		if res.CpuQuota != 0 {
			q := res.CpuQuota
			lr.CPU.Quota = &q
		}
		if res.CpusetCpus != "" {
			lr.CPU.Cpus = res.CpusetCpus
		}
		if res.MemoryLimitInBytes > 0 {
			m := res.MemoryLimitInBytes
			lr.Memory.Limit = &m
			// As at creation (containerd's CRI opts): memory+swap equal to memory unless asked otherwise, so
			// the container does not swap, and cgroup v1 accepts a memory limit above the old memory+swap one.
			swap := res.MemorySwapLimitInBytes
			if swap == 0 && specopts.SwapControllerAvailable() {
				swap = m
			}
			if swap != 0 {
				lr.Memory.Swap = &swap
			}
		}
	}
	return containerd.WithResources(lr)
}

// LayerUsage is what a container's writable layer holds, as the snapshotter counts it.
type LayerUsage struct{ Bytes, Inodes int64 }

// WritableLayers measures the writable layer of the containers with the given IDs (every container of the
// runtime for nil), by ID: one snapshotter call each, and nothing else read (ListContainerStats also reads each
// record and asks each shim for metrics). The node's stats call it once a minute, and for new containers.
func (r *Runtime) WritableLayers(ctx context.Context, ids []string) (map[string]LayerUsage, error) {
	ctx = r.ns(ctx)
	recs, err := r.listRecords(ctx, labelIs(labelKind, kindContainer))
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	out := make(map[string]LayerUsage, len(recs))
	for _, rec := range recs {
		if rec.SnapshotKey == "" || ids != nil && !want[rec.ID] {
			continue
		}
		if u, err := r.client.SnapshotService(rec.Snapshotter).Usage(ctx, rec.SnapshotKey); err == nil {
			out[rec.ID] = LayerUsage{Bytes: max(u.Size, 0), Inodes: max(u.Inodes, 0)}
		}
	}
	return out, nil
}
