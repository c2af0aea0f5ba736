package criserver

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Version reports the served runtime's name and version.
func (s *Server) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return reply(s.rt.Version(ctx, req.GetVersion()))
}

// Status reports the runtime's conditions.
func (s *Server) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return reply(s.rt.Status(ctx, req.GetVerbose()))
}

// RuntimeConfig reports the runtime's configuration (its cgroup driver).
func (s *Server) RuntimeConfig(ctx context.Context, _ *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return reply(s.rt.RuntimeConfig(ctx))
}

// UpdateRuntimeConfig passes the runtime configuration (the pod CIDR) on.
func (s *Server) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	if err := s.rt.UpdateRuntimeConfig(ctx, req.GetRuntimeConfig()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// RunPodSandbox creates and starts a pod sandbox.
func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	id, err := s.rt.RunPodSandbox(ctx, req.GetConfig(), req.GetRuntimeHandler())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// StopPodSandbox stops a pod sandbox and its containers.
func (s *Server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	if err := s.rt.StopPodSandbox(ctx, req.GetPodSandboxId()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox removes a pod sandbox and its containers.
func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if err := s.rt.RemovePodSandbox(ctx, req.GetPodSandboxId()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// PodSandboxStatus reports a pod sandbox's status.
func (s *Server) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	return reply(s.rt.PodSandboxStatus(ctx, req.GetPodSandboxId(), req.GetVerbose()))
}

// ListPodSandbox lists pod sandboxes matching the filter.
func (s *Server) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := s.rt.ListPodSandbox(ctx, req.GetFilter())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

// UpdatePodSandboxResources passes pod-level resources on.
func (s *Server) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return reply(s.rt.UpdatePodSandboxResources(ctx, req))
}

// CreateContainer creates a container in a pod sandbox.
func (s *Server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	id, err := s.rt.CreateContainer(ctx, req.GetPodSandboxId(), req.GetConfig(), req.GetSandboxConfig())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// StartContainer starts a created container.
func (s *Server) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	if err := s.rt.StartContainer(ctx, req.GetContainerId()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer stops a container, killing it after the request's timeout in seconds.
func (s *Server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	if err := s.rt.StopContainer(ctx, req.GetContainerId(), req.GetTimeout()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer removes a container.
func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := s.rt.RemoveContainer(ctx, req.GetContainerId()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// ListContainers lists containers matching the filter.
func (s *Server) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	ctrs, err := s.rt.ListContainers(ctx, req.GetFilter())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListContainersResponse{Containers: ctrs}, nil
}

// ContainerStatus reports a container's status.
func (s *Server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return reply(s.rt.ContainerStatus(ctx, req.GetContainerId(), req.GetVerbose()))
}

// UpdateContainerResources changes a container's resources.
func (s *Server) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	res := &runtimeapi.ContainerResources{Linux: req.GetLinux(), Windows: req.GetWindows()}
	if err := s.rt.UpdateContainerResources(ctx, req.GetContainerId(), res); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog reopens a container's log file.
func (s *Server) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	if err := s.rt.ReopenContainerLog(ctx, req.GetContainerId()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// ExecSync runs a command in a container and returns its output. A command that ran and failed is not an
// error: its exit code is in the response. A zero timeout waits forever.
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	timeout := time.Duration(req.GetTimeout()) * time.Second
	stdout, stderr, err := s.rt.ExecSync(ctx, req.GetContainerId(), req.GetCmd(), timeout)
	if err != nil {
		code, ok := exitStatus(err)
		if !ok {
			return nil, toStatus(err)
		}
		return &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr, ExitCode: int32(code)}, nil
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr}, nil
}

// Exec returns the streaming URL of an exec session.
func (s *Server) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return reply(s.rt.Exec(ctx, req))
}

// Attach returns the streaming URL of an attach session.
func (s *Server) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return reply(s.rt.Attach(ctx, req))
}

// PortForward returns the streaming URL of a port-forward session.
func (s *Server) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return reply(s.rt.PortForward(ctx, req))
}

// CheckpointContainer checkpoints a container.
func (s *Server) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	if err := s.rt.CheckpointContainer(ctx, req); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.CheckpointContainerResponse{}, nil
}

// ContainerStats reports a container's resource usage.
func (s *Server) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	st, err := s.rt.ContainerStats(ctx, req.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ContainerStatsResponse{Stats: st}, nil
}

// ListContainerStats reports the resource usage of containers matching the filter.
func (s *Server) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	st, err := s.rt.ListContainerStats(ctx, req.GetFilter())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: st}, nil
}

// PodSandboxStats reports a pod sandbox's resource usage.
func (s *Server) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	st, err := s.rt.PodSandboxStats(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
}

// ListPodSandboxStats reports the resource usage of pod sandboxes matching the filter.
func (s *Server) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	st, err := s.rt.ListPodSandboxStats(ctx, req.GetFilter())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: st}, nil
}

// ListMetricDescriptors describes the metrics ListPodSandboxMetrics returns.
func (s *Server) ListMetricDescriptors(ctx context.Context, _ *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	d, err := s.rt.ListMetricDescriptors(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListMetricDescriptorsResponse{Descriptors: d}, nil
}

// ListPodSandboxMetrics reports the runtime's extra pod metrics.
func (s *Server) ListPodSandboxMetrics(ctx context.Context, _ *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	m, err := s.rt.ListPodSandboxMetrics(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListPodSandboxMetricsResponse{PodMetrics: m}, nil
}
