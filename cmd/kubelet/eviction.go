package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/kubelet/pkg/eviction"
	"github.com/nodeagent/kubelet/pkg/node"
	"github.com/nodeagent/kubelet/pkg/stats"
	podsync "github.com/nodeagent/kubelet/pkg/sync"
)

// nodeThresholds turns the hard eviction thresholds into what the node's allocatable takes off capacity
// (memory.available and nodefs.available, as upstream); a signal without a hard threshold takes nothing off.
func nodeThresholds(ts []eviction.Threshold, o *options) node.Thresholds {
	t := node.Thresholds{MemoryAvailableBytes: -1, NodeFSAvailable: -1, NodeFSInodesFree: -1, TransitionPeriod: o.evictionTransition}
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
		Stopped:           func(p *v1.Pod) bool { return d.kl.PodStopped(p) },
		Evicter:           eviction.EvictFunc(func(ctx context.Context, p *v1.Pod, g int64, m string) error { return d.kl.EvictPod(ctx, p, g, m) }),
		Recorder:          recorder,
		// Events about the node carry its name as UID, as upstream's kubelet sets it.
		NodeRef: &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)},
	})
}
