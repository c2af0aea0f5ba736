package podsync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/podspec"
)

const (
	defaultGracePeriod = 30
	// minGracePeriod is the least time a container gets to stop after its preStop hook (upstream's floor).
	minGracePeriod = 2
)

// gracePeriodOf returns the termination grace period of a pod in seconds: the override, else the deletion
// grace period, else the spec's, else the one recorded on its containers (orphans), else 30.
func gracePeriodOf(pod *v1.Pod, override *int64, state *pleg.PodState) int64 {
	g := int64(-1)
	switch {
	case override != nil:
		g = *override
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	case state != nil:
		for _, c := range state.Containers {
			if n, err := strconv.ParseInt(c.Annotations[podfacts.AnnotationPodTerminationGracePeriod], 10, 64); err == nil {
				g = max(g, n)
			}
		}
	}
	if g < 0 {
		g = defaultGracePeriod
	}
	return g
}

// killPod stops a pod within grace seconds: app (and running init) containers first, in parallel, with their
// preStop hooks; then sidecars one at a time in reverse order; then every sandbox.
func (k *Kubelet) killPod(ctx context.Context, pod *v1.Pod, state *pleg.PodState, grace int64) error {
	start := k.clock.Now()
	deadline := start.Add(time.Duration(grace) * time.Second)
	sidecarOrder := map[string]int{}
	for i := range pod.Spec.InitContainers {
		if podfacts.IsSidecar(&pod.Spec.InitContainers[i]) {
			sidecarOrder[pod.Spec.InitContainers[i].Name] = i
		}
	}
	var main, sidecars []*runtimeapi.ContainerStatus
	for _, c := range runningContainers(state) {
		name := c.GetMetadata().GetName()
		_, isSidecar := sidecarOrder[name]
		if isSidecar || (len(pod.Spec.Containers) == 0 && c.Labels[podfacts.LabelContainerType] == podspec.KindSidecar) {
			sidecars = append(sidecars, c)
		} else {
			main = append(main, c)
		}
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, c := range main {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.killContainer(ctx, pod, c, grace, ""); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Sidecars stop last, the last started first.
	sort.SliceStable(sidecars, func(i, j int) bool {
		oi, iok := sidecarOrder[sidecars[i].GetMetadata().GetName()]
		oj, jok := sidecarOrder[sidecars[j].GetMetadata().GetName()]
		if iok && jok && oi != oj {
			return oi > oj
		}
		return sidecars[i].CreatedAt > sidecars[j].CreatedAt
	})
	for _, c := range sidecars {
		left := int64(deadline.Sub(k.clock.Now()) / time.Second)
		if err := k.killContainer(ctx, pod, c, left, ""); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	containersStopped := k.clock.Now()
	defer func() {
		klog.FromContext(ctx).V(3).Info("Killed pod", "pod", klog.KObj(pod), "containers", containersStopped.Sub(start),
			"sandboxes", k.clock.Since(containersStopped))
	}()
	if state != nil {
		for _, sb := range state.Sandboxes {
			if err := k.runtime.StopPodSandbox(ctx, sb.Id); err != nil {
				errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.Id, err))
			}
		}
	}
	if len(errs) > 0 {
		k.recorder.Eventf(podRef(pod, ""), v1.EventTypeWarning, eventFailedKillPod, "error killing pod: %v", errors.Join(errs...))
	}
	return errors.Join(errs...)
}

// killContainer runs a running container's preStop hook (within grace), then stops it with what is left of
// grace (at least minGracePeriod).
func (k *Kubelet) killContainer(ctx context.Context, pod *v1.Pod, c *runtimeapi.ContainerStatus, grace int64, message string) error {
	name := c.GetMetadata().GetName()
	spec := findContainer(pod, name)
	if spec == nil {
		spec = &v1.Container{Name: name}
	}
	if message == "" {
		message = "Stopping container " + name
	}
	k.recorder.Event(containerRef(pod, spec), v1.EventTypeNormal, eventKilling, message)
	hook := podspec.PreStopFromAnnotations(c.Annotations)
	if spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
		hook = spec.Lifecycle.PreStop
	}
	if hook != nil && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING && grace > 0 {
		start := k.clock.Now()
		hookCtx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
		if err := k.runHook(hookCtx, pod, spec, c.Id, hook, time.Duration(grace)*time.Second); err != nil {
			klog.FromContext(ctx).Info("PreStop hook failed", "pod", klog.KObj(pod), "container", name, "err", err)
			k.recorder.Eventf(containerRef(pod, spec), v1.EventTypeWarning, eventFailedPreStopHook, "PreStopHook failed: %v", err)
		}
		cancel()
		grace -= int64(k.clock.Since(start) / time.Second)
	}
	grace = max(grace, minGracePeriod)
	if err := k.runtime.StopContainer(ctx, c.Id, grace); err != nil {
		return fmt.Errorf("stop container %q: %w", name, err)
	}
	return nil
}

// findContainer returns the spec of a container of pod by name (app or init), or nil.
func findContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
