package main

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/kubelet/pkg/cgroups"
	"github.com/nodeagent/kubelet/pkg/eviction"
	"github.com/nodeagent/kubelet/pkg/imagegc"
	"github.com/nodeagent/kubelet/pkg/node"
	"github.com/nodeagent/kubelet/pkg/stats"
	podsync "github.com/nodeagent/kubelet/pkg/sync"
)

// nodeThresholds turns the hard eviction thresholds into what the node's allocatable takes off capacity
// (memory.available and nodefs.available, as upstream); a signal without a hard threshold takes nothing off.
func nodeThresholds(ts []eviction.Threshold) node.Thresholds {
	t := node.Thresholds{MemoryAvailableBytes: -1, NodeFSAvailable: -1}
	for _, th := range ts {
		if !th.Hard() {
			continue
		}
		switch th.Signal {
		case eviction.SignalMemoryAvailable:
			t.MemoryAvailableBytes, t.MemoryAvailableFraction = th.Value.Quantity, th.Value.Percentage
			if th.Value.Percentage > 0 {
				t.MemoryAvailableBytes = -1
			}
		case eviction.SignalNodeFsAvailable:
			t.NodeFSAvailable, t.NodeFSAvailableBytes = th.Value.Percentage, th.Value.Quantity
			if th.Value.Percentage == 0 {
				t.NodeFSAvailable = -1
			}
		}
	}
	return t
}

// evictionDeps are what the eviction manager reaches once the kubelet and the stats collector exist; the
// manager is built before them (admission and the node's conditions ask it).
type evictionDeps struct {
	kl        *podsync.Kubelet
	collector *stats.Collector
	images    *imagegc.Manager
	cgroups   *cgroups.Manager
	capacity  func() v1.ResourceList // the node's capacity (its memory)
}

// memoryAvailable is memory.available read cheaply for the eviction manager's memory watch: the memory
// capacity less the node's working set, as the stats gathering computes it.
func (d *evictionDeps) memoryAvailable() (int64, int64, error) {
	ws, err := d.cgroups.NodeMemoryWorkingSet()
	if err != nil {
		return 0, 0, err
	}
	m := d.capacity()[v1.ResourceMemory]
	capacity := m.Value()
	return capacity - int64(ws), capacity, nil
}

// Reclaim frees node-level disk before pods are evicted for it, as upstream's container and image GC do on
// the eviction manager's demand: the dead containers of terminated pods first (their images may then go),
// then the unused images.
func (d *evictionDeps) Reclaim(ctx context.Context, _ v1.ResourceName) error {
	removed, cerr := d.kl.ReclaimDeadContainers(ctx)
	freed, ierr := d.images.DeleteUnused(ctx)
	klog.FromContext(ctx).Info("Eviction manager: reclaimed node-level disk", "deadContainersRemoved", removed, "imageBytesFreed", freed)
	return errors.Join(cerr, ierr)
}

// newImageGC builds the image garbage collector: the runtime's images and containers, the image
// filesystem as the stats collector last measured it.
func newImageGC(ctx context.Context, o *options, d nodeDeps, kl *podsync.Kubelet, recorder record.EventRecorder, collector *stats.Collector, nodeName string) (*imagegc.Manager, error) {
	return imagegc.New(ctx, imagegc.Config{
		HighThresholdPercent: o.imageGCHigh, LowThresholdPercent: o.imageGCLow,
		MinAge: o.imageGCMinAge, MaxAge: o.imageGCMaxAge,
		Images: d.images,
		Containers: func(ctx context.Context) ([]*runtimeapi.Container, error) {
			return d.runtime.ListContainers(ctx, nil)
		},
		VolumeImages: kl.VolumeImages,
		Fs: func(context.Context) (int64, int64, error) {
			s := collector.Summary()
			if s == nil || s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil ||
				s.Node.Runtime.ImageFs.CapacityBytes == nil || s.Node.Runtime.ImageFs.AvailableBytes == nil {
				return 0, 0, errors.New("the image filesystem has not been measured")
			}
			fs := s.Node.Runtime.ImageFs
			return int64(*fs.CapacityBytes), int64(*fs.AvailableBytes), nil
		},
		Keep:     []string{o.builtin.PauseImage},
		RootDir:  o.rootDir,
		Recorder: recorder,
		NodeRef:  nodeRef(nodeName),
	})
}

// nodeRef is what an event about the node refers to: its name as UID too, as upstream's kubelet sets it.
func nodeRef(name string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}

func newEvictionManager(o *options, ts []eviction.Threshold, nodeName string, recorder record.EventRecorder, d *evictionDeps) *eviction.Manager {
	return eviction.New(eviction.Config{
		Thresholds:        ts,
		MaxPodGracePeriod: o.evictionMaxPodGrace,
		TransitionPeriod:  o.evictionTransition,
		Summary:           func() *statsapi.Summary { return d.collector.Summary() },
		Gather:            func(ctx context.Context) { d.collector.Collect(ctx) },
		ActivePods:        func() []*v1.Pod { return d.kl.ActivePods() },
		Ready:             func() bool { return d.kl.SourcesReady() },
		Stopped:           func(p *v1.Pod) bool { return d.kl.PodCleanedUp(p) },
		Reclaimer:         d,
		MemoryAvailable:   d.memoryAvailable,
		Evicter:           eviction.EvictFunc(func(ctx context.Context, p *v1.Pod, g int64, m string) error { return d.kl.EvictPod(ctx, p, g, m) }),
		Recorder:          recorder,
		NodeRef:           nodeRef(nodeName),
	})
}
