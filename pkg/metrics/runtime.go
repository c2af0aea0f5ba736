package metrics

import (
	"context"
	"time"

	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is a CRI runtime whose calls count into kubelet_runtime_operations_total, _duration_seconds and
// _errors_total, with upstream's operation names ("create_container", "list_podsandbox", ...). Calls not
// listed here go to the runtime unobserved.
type Runtime struct {
	cri.RuntimeService
}

var _ cri.RuntimeService = Runtime{}

// Images is an image service whose calls count as Runtime's do.
type Images struct {
	cri.ImageManagerService
}

var _ cri.ImageManagerService = Images{}

// observe counts one call of op that began at start and ended with err.
func observe(op string, start time.Time, err error) {
	RuntimeOperations.WithLabelValues(op).Inc()
	RuntimeOperationsDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		RuntimeOperationsErrors.WithLabelValues(op).Inc()
	}
}

func (r Runtime) Version(ctx context.Context, v string) (_ *runtimeapi.VersionResponse, err error) {
	defer func(t time.Time) { observe("version", t, err) }(time.Now())
	return r.RuntimeService.Version(ctx, v)
}

func (r Runtime) Status(ctx context.Context, verbose bool) (_ *runtimeapi.StatusResponse, err error) {
	defer func(t time.Time) { observe("status", t, err) }(time.Now())
	return r.RuntimeService.Status(ctx, verbose)
}

func (r Runtime) RunPodSandbox(ctx context.Context, c *runtimeapi.PodSandboxConfig, h string) (_ string, err error) {
	defer func(t time.Time) { observe("run_podsandbox", t, err) }(time.Now())
	return r.RuntimeService.RunPodSandbox(ctx, c, h)
}

func (r Runtime) StopPodSandbox(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("stop_podsandbox", t, err) }(time.Now())
	return r.RuntimeService.StopPodSandbox(ctx, id)
}

func (r Runtime) RemovePodSandbox(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("remove_podsandbox", t, err) }(time.Now())
	return r.RuntimeService.RemovePodSandbox(ctx, id)
}

func (r Runtime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.PodSandboxStatusResponse, err error) {
	defer func(t time.Time) { observe("podsandbox_status", t, err) }(time.Now())
	return r.RuntimeService.PodSandboxStatus(ctx, id, verbose)
}

func (r Runtime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) (_ []*runtimeapi.PodSandbox, err error) {
	defer func(t time.Time) { observe("list_podsandbox", t, err) }(time.Now())
	return r.RuntimeService.ListPodSandbox(ctx, f)
}

func (r Runtime) CreateContainer(ctx context.Context, sb string, c *runtimeapi.ContainerConfig, sc *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer func(t time.Time) { observe("create_container", t, err) }(time.Now())
	return r.RuntimeService.CreateContainer(ctx, sb, c, sc)
}

func (r Runtime) StartContainer(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("start_container", t, err) }(time.Now())
	return r.RuntimeService.StartContainer(ctx, id)
}

func (r Runtime) StopContainer(ctx context.Context, id string, timeout int64) (err error) {
	defer func(t time.Time) { observe("stop_container", t, err) }(time.Now())
	return r.RuntimeService.StopContainer(ctx, id, timeout)
}

func (r Runtime) RemoveContainer(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("remove_container", t, err) }(time.Now())
	return r.RuntimeService.RemoveContainer(ctx, id)
}

func (r Runtime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, err error) {
	defer func(t time.Time) { observe("list_containers", t, err) }(time.Now())
	return r.RuntimeService.ListContainers(ctx, f)
}

func (r Runtime) ContainerStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.ContainerStatusResponse, err error) {
	defer func(t time.Time) { observe("container_status", t, err) }(time.Now())
	return r.RuntimeService.ContainerStatus(ctx, id, verbose)
}

func (r Runtime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.ContainerResources) (err error) {
	defer func(t time.Time) { observe("update_container", t, err) }(time.Now())
	return r.RuntimeService.UpdateContainerResources(ctx, id, res)
}

func (r Runtime) ReopenContainerLog(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("reopen_container_log", t, err) }(time.Now())
	return r.RuntimeService.ReopenContainerLog(ctx, id)
}

func (r Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (_, _ []byte, err error) {
	defer func(t time.Time) { observe("exec_sync", t, err) }(time.Now())
	return r.RuntimeService.ExecSync(ctx, id, cmd, timeout)
}

func (r Runtime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (_ *runtimeapi.ExecResponse, err error) {
	defer func(t time.Time) { observe("exec", t, err) }(time.Now())
	return r.RuntimeService.Exec(ctx, req)
}

func (r Runtime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (_ *runtimeapi.AttachResponse, err error) {
	defer func(t time.Time) { observe("attach", t, err) }(time.Now())
	return r.RuntimeService.Attach(ctx, req)
}

func (r Runtime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (_ *runtimeapi.PortForwardResponse, err error) {
	defer func(t time.Time) { observe("port_forward", t, err) }(time.Now())
	return r.RuntimeService.PortForward(ctx, req)
}

func (r Runtime) ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) (_ []*runtimeapi.ContainerStats, err error) {
	defer func(t time.Time) { observe("list_container_stats", t, err) }(time.Now())
	return r.RuntimeService.ListContainerStats(ctx, f)
}

func (i Images) ListImages(ctx context.Context, f *runtimeapi.ImageFilter) (_ []*runtimeapi.Image, err error) {
	defer func(t time.Time) { observe("list_images", t, err) }(time.Now())
	return i.ImageManagerService.ListImages(ctx, f)
}

func (i Images) ImageStatus(ctx context.Context, img *runtimeapi.ImageSpec, verbose bool) (_ *runtimeapi.ImageStatusResponse, err error) {
	defer func(t time.Time) { observe("image_status", t, err) }(time.Now())
	return i.ImageManagerService.ImageStatus(ctx, img, verbose)
}

func (i Images) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer func(t time.Time) { observe("pull_image", t, err) }(time.Now())
	return i.ImageManagerService.PullImage(ctx, img, auth, sb)
}

func (i Images) RemoveImage(ctx context.Context, img *runtimeapi.ImageSpec) (err error) {
	defer func(t time.Time) { observe("remove_image", t, err) }(time.Now())
	return i.ImageManagerService.RemoveImage(ctx, img)
}

func (i Images) ImageFsInfo(ctx context.Context) (_ *runtimeapi.ImageFsInfoResponse, err error) {
	defer func(t time.Time) { observe("image_fs_info", t, err) }(time.Now())
	return i.ImageManagerService.ImageFsInfo(ctx)
}
