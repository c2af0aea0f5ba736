package node

import (
	"context"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
)

// watched holds the Node as the API last showed it to the node's own watch.
type watched struct{ node atomic.Pointer[v1.Node] }

// watchNode keeps w up to date with the Node in the API: a list and watch of its one name, resumed after
// disconnects, until ctx ends. Labels (kubectl label node) and taints (kubectl taint node) set by others
// reach admission this way within moments.
func (a *Agent) watchNode(ctx context.Context) {
	selector := fields.OneTermEqualSelector("metadata.name", a.cfg.Name).String()
	nodes := a.cfg.Client.CoreV1().Nodes()
	lw := kubeclient.ListerWatcher(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return nodes.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return nodes.Watch(ctx, o)
		})
	informer := cache.NewSharedIndexInformer(lw, &v1.Node{}, 0, cache.Indexers{})
	set := func(obj interface{}) {
		if n, ok := obj.(*v1.Node); ok && n.Name == a.cfg.Name {
			old := a.watched.node.Swap(n)
			if a.cfg.Seen != nil && (old == nil || old.ResourceVersion != n.ResourceVersion) {
				a.cfg.Seen(n)
			}
			if c := conditionOf(&n.Status, v1.NodeReady); c != nil && c.Status == v1.ConditionUnknown {
				// The node lifecycle controller marked the node Unknown (the kubelet never posts that): the
				// kubelet was frozen or cut off without its calls failing. Read the Node afresh and post.
				a.stale.Store(true)
				a.Resync()
			}
			if a.cfg.PodCIDR != nil && podCIDRs(n) != "" && (old == nil || podCIDRs(old) != podCIDRs(n)) {
				a.Resync() // a pod CIDR assigned: the status sync hands it to the runtime now
			}
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj interface{}) { set(obj) },
		DeleteFunc: func(interface{}) { a.watched.node.Store(nil) },
	}); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to watch the node's own Node")
		return
	}
	informer.RunWithContext(ctx)
}

// Node returns the Node as the API last showed it, or, until the API has (at start, or with the API away),
// the Node this agent registers: its labels (default ones and --node-labels, and those of Config.LastKnown),
// --register-with-taints and allocatable, as upstream's kubelet falls back to its initial node. The caller must not modify it. Safe for
// concurrent use.
func (a *Agent) Node() *v1.Node {
	if n := a.watched.node.Load(); n != nil {
		return n
	}
	return a.fallback
}
