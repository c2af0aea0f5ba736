package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	cri "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/containerlogs"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// nodeLogsDir is the node's log directory, served under /logs/ as upstream's kubelet serves it.
const nodeLogsDir = "/var/log"

// newLogManager rotates the containers' logs (--container-log-max-size, --container-log-max-files) and keeps
// their links in the "containers" directory beside the pod log directory (/var/log/containers).
func newLogManager(o *options, d nodeDeps, recorder record.EventRecorder, containers func() []containerlogs.Container) (*containerlogs.Manager, error) {
	size, err := o.logMaxSize()
	if err != nil {
		return nil, err
	}
	cfg := containerlogs.Config{
		Containers: containers, Runtime: d.runtime, LogsDir: o.podLogsDir,
		LinksDir: filepath.Join(filepath.Dir(filepath.Clean(o.podLogsDir)), "containers"),
		MaxSize:  size, MaxFiles: o.containerLogMaxFiles, Interval: o.containerLogMonitorInterval,
		RuntimeRotates: d.builtin != nil,
	}
	if d.builtin != nil {
		// The log daemon never holds a container up when its log cannot be written: the lines are dropped,
		// counted, and reported here as a warning on the pod.
		cfg.Lost = d.builtin.LostLogLines
		cfg.OnLost = func(c containerlogs.Container, more, total int) {
			ref := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: c.Namespace, Name: c.Pod, UID: types.UID(c.PodUID),
				FieldPath: fmt.Sprintf("spec.containers{%s}", c.Name)}
			recorder.Eventf(ref, v1.EventTypeWarning, "LogLinesDropped",
				"%d lines of container %s's output could not be written to its log (%d in all; is the disk full?)", more, c.Name, total)
		}
	}
	return containerlogs.New(cfg)
}

// linkLog makes the link to a container's log as the container starts.
func linkLog(ctx context.Context, logs *containerlogs.Manager, c containerlogs.Container) {
	if err := logs.Link(c); err != nil {
		klog.FromContext(ctx).V(2).Info("Failed to link a container's log", "pod", klog.KRef(c.Namespace, c.Pod), "container", c.Name, "err", err)
	}
}

// layersOf measures the containers' writable layers: the built-in runtime's snapshots directly, a remote
// runtime's through CRI ListContainerStats.
func layersOf(d nodeDeps) func(context.Context, []string) (map[string]volume.Usage, error) {
	if rt := d.builtin; rt != nil {
		return func(ctx context.Context, ids []string) (map[string]volume.Usage, error) {
			ls, err := rt.WritableLayers(ctx, ids)
			out := make(map[string]volume.Usage, len(ls))
			for id, u := range ls {
				out[id] = volume.Usage{Bytes: u.Bytes, Inodes: u.Inodes}
			}
			return out, err
		}
	}
	return func(ctx context.Context, _ []string) (map[string]volume.Usage, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		list, err := d.runtime.ListContainerStats(ctx, nil)
		out := make(map[string]volume.Usage, len(list))
		for _, s := range list {
			if l := s.GetWritableLayer(); l != nil {
				out[s.GetAttributes().GetId()] = volume.Usage{Bytes: int64(l.GetUsedBytes().GetValue()), Inodes: int64(l.GetInodesUsed().GetValue())}
			}
		}
		return out, err
	}
}

// imageFsOf reads the image filesystem's usage and mount point from the runtime.
func imageFsOf(images cri.ImageManagerService) func(context.Context) (volume.Usage, string, error) {
	return func(ctx context.Context) (volume.Usage, string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := images.ImageFsInfo(ctx)
		if err != nil {
			return volume.Usage{}, "", err
		}
		fss := resp.GetImageFilesystems()
		if len(fss) == 0 {
			return volume.Usage{}, "", errors.New("the runtime reports no image filesystem")
		}
		fs := fss[0]
		return volume.Usage{Bytes: int64(fs.GetUsedBytes().GetValue()), Inodes: int64(fs.GetInodesUsed().GetValue())},
			fs.GetFsId().GetMountpoint(), nil
	}
}

// gatherer is a registry of one collector.
func gatherer(c prometheus.Collector) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return reg
}
