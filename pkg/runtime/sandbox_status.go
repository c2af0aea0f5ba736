package runtime

import (
	"context"
	"fmt"
	"strings"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// loadSandbox finds a sandbox's record by ID (or unique ID prefix) and decodes its metadata.
func (r *Runtime) loadSandbox(ctx context.Context, id string) (containers.Container, *sandboxMeta, error) {
	rec, err := r.findContainer(ctx, id, kindSandbox)
	if err != nil {
		return containers.Container{}, nil, fmt.Errorf("pod sandbox %q: %w", id, err)
	}
	meta, err := r.records.metas.sandbox(rec)
	if err != nil {
		return containers.Container{}, nil, err
	}
	return rec, meta, nil
}

// recordOf returns the record with this exact ID, without its spec: from the index, else from containerd.
func (r *Runtime) recordOf(ctx context.Context, id string) (containers.Container, error) {
	if c, ok := r.records.get(id); ok {
		return c, nil
	}
	return r.client.ContainerService().Get(ctx, id)
}

// findContainer returns the containerd record of kind with the given ID or unique ID prefix.
func (r *Runtime) findContainer(ctx context.Context, id, kind string) (containers.Container, error) {
	if id == "" {
		return containers.Container{}, fmt.Errorf("empty ID: %w", errdefs.ErrInvalidArgument)
	}
	if c, err := r.recordOf(ctx, id); err == nil {
		if c.Labels[labelKind] != kind {
			return containers.Container{}, fmt.Errorf("not a %s: %w", kind, errdefs.ErrNotFound)
		}
		return c, nil
	}
	list, err := r.listRecords(ctx, labelIs(labelKind, kind))
	if err != nil {
		return containers.Container{}, err
	}
	var found []containers.Container
	for _, c := range list {
		if strings.HasPrefix(c.ID, id) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return containers.Container{}, errdefs.ErrNotFound
	case 1:
		return found[0], nil
	default:
		return containers.Container{}, fmt.Errorf("ID prefix %q is ambiguous: %w", id, errdefs.ErrInvalidArgument)
	}
}

// tasksByContainer lists every task in the namespace once, keyed by container ID.
func (r *Runtime) tasksByContainer(ctx context.Context) (map[string]*task.Process, error) {
	resp, err := r.client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	m := make(map[string]*task.Process, len(resp.Tasks))
	for _, t := range resp.Tasks {
		m[t.ID] = t
	}
	return m, nil
}

// sandboxState is READY while the sandbox is neither stopped nor its pause process gone. With a task given
// (a status call), the task decides too; lists go by the labels, kept current from containerd's events.
func sandboxState(rec containers.Container, t *task.Process, fromLabels bool) runtimeapi.PodSandboxState {
	if rec.Labels[labelStopped] == "true" || rec.Labels[labelExited] == "true" || rec.Labels[labelIncomplete] == "true" {
		return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	if fromLabels || (t != nil && t.Status == task.Status_RUNNING) {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

// PodSandboxStatus returns the sandbox's state, IPs and namespaces.
func (r *Runtime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	ctx = r.ns(ctx)
	rec, err := r.findContainer(ctx, podSandboxID, kindSandbox)
	if err != nil {
		return nil, fmt.Errorf("pod sandbox %q: %w", podSandboxID, err)
	}
	meta, err := r.records.metas.sandbox(rec)
	if err != nil {
		return nil, err
	}
	t, err := r.taskOf(ctx, rec.ID)
	if err != nil {
		return nil, fmt.Errorf("pod sandbox %q: task: %w", podSandboxID, err)
	}
	st := &runtimeapi.PodSandboxStatus{
		Id:          rec.ID,
		Metadata:    meta.Metadata,
		State:       sandboxState(r.withLabelsInFlight(rec), t, false),
		CreatedAt:   meta.CreatedAt,
		Labels:      meta.Labels,
		Annotations: meta.Annotations,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: nsMode(meta.HostNetwork),
			Pid:     podNsMode(meta.HostPID),
			Ipc:     nsMode(meta.HostIPC),
			// The pod's user namespace as asked, as containerd's CRI plugin echoes it; nil for the host's.
			UsernsOptions: meta.Userns,
		}}},
		RuntimeHandler: meta.Handler,
	}
	if len(meta.IPs) > 0 && !meta.HostNetwork {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: meta.IPs[0]}
		for _, ip := range meta.IPs[1:] {
			st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if verbose {
		resp.Info = map[string]string{"netnsPath": meta.NetnsPath, "cgroupParent": meta.CgroupParent}
	}
	return resp, nil
}

func nsMode(host bool) runtimeapi.NamespaceMode {
	if host {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_POD
}

func podNsMode(host bool) runtimeapi.NamespaceMode {
	if host {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_CONTAINER
}

// ListPodSandbox lists sandboxes matching the filter, with one containerd call for the records and one for
// the tasks.
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx = r.ns(ctx)
	recs, err := r.listRecords(ctx, listMatch(kindSandbox, filter.GetLabelSelector()))
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var out []*runtimeapi.PodSandbox
	for _, rec := range recs {
		if _, starting := r.creating.Load(rec.ID); starting {
			continue // listed once RunPodSandbox returns, as with other runtimes
		}
		meta, err := r.records.metas.sandbox(rec)
		if err != nil {
			logger(ctx).Error(err, "Skipping sandbox with unreadable metadata", "sandbox", rec.ID)
			continue
		}
		sb := &runtimeapi.PodSandbox{
			Id:             rec.ID,
			Metadata:       meta.Metadata,
			State:          sandboxState(r.withLabelsInFlight(rec), nil, true),
			CreatedAt:      meta.CreatedAt,
			Labels:         meta.Labels,
			Annotations:    meta.Annotations,
			RuntimeHandler: meta.Handler,
		}
		if filter != nil {
			if filter.Id != "" && !strings.HasPrefix(sb.Id, filter.Id) {
				continue
			}
			if filter.State != nil && filter.State.State != sb.State {
				continue
			}
			if !matchLabels(filter.LabelSelector, sb.Labels) {
				continue
			}
		}
		out = append(out, sb)
	}
	return out, nil
}
