package server

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// CRI labels the kubelet puts on sandboxes and containers.
const (
	labelPodUID        = podfacts.LabelPodUID
	labelContainerName = podfacts.LabelContainerName
)

// CRIResolver finds a pod's sandbox and containers through CRI list calls, by the labels the kubelet sets.
type CRIResolver struct {
	Runtime interface {
		ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
		ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	}
}

var _ Resolver = CRIResolver{}

// ContainerID returns the running instance of the pod's container, else its newest one.
func (r CRIResolver) ContainerID(ctx context.Context, pod *v1.Pod, container string) (string, error) {
	ctrs, err := r.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
		labelPodUID: string(pod.UID), labelContainerName: container,
	}})
	if err != nil {
		return "", fmt.Errorf("list containers of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return pickContainer(ctrs, pod, container)
}

func pickContainer(ctrs []*runtimeapi.Container, pod *v1.Pod, container string) (string, error) {
	var best *runtimeapi.Container
	for _, c := range ctrs {
		switch {
		case best == nil:
			best = c
		case c.State == runtimeapi.ContainerState_CONTAINER_RUNNING && best.State != runtimeapi.ContainerState_CONTAINER_RUNNING:
			best = c
		case (c.State == runtimeapi.ContainerState_CONTAINER_RUNNING) == (best.State == runtimeapi.ContainerState_CONTAINER_RUNNING) && c.CreatedAt > best.CreatedAt:
			best = c
		}
	}
	if best == nil {
		return "", fmt.Errorf("container %q of pod %s/%s: %w", container, pod.Namespace, pod.Name, ErrNotFound)
	}
	return best.Id, nil
}

// SandboxID returns the pod's ready sandbox.
func (r CRIResolver) SandboxID(ctx context.Context, pod *v1.Pod) (string, error) {
	sbs, err := r.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{labelPodUID: string(pod.UID)},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		return "", fmt.Errorf("list sandboxes of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if len(sbs) == 0 {
		return "", fmt.Errorf("running sandbox of pod %s/%s: %w", pod.Namespace, pod.Name, ErrNotFound)
	}
	newest := sbs[0]
	for _, sb := range sbs[1:] {
		if sb.CreatedAt > newest.CreatedAt {
			newest = sb
		}
	}
	return newest.Id, nil
}
