package config

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// apiSource watches the pods bound to the node. The informer's reflector resumes a broken watch from the
// last resourceVersion it saw (relisting only when that is too old), and Sources drops the repeats a relist
// produces, so a disconnect neither loses nor repeats work. An API server that cannot be reached is tried
// again every second (retryUnreachable).
type apiSource struct {
	client   kubeclient.Interface
	nodeName string
	out      *Sources
	clock    clock.Clock
}

func newAPISource(client kubeclient.Interface, nodeName string, out *Sources, clk clock.Clock) *apiSource {
	return &apiSource{client: client, nodeName: nodeName, out: out, clock: clk}
}

func (a *apiSource) run(ctx context.Context) {
	selector := fields.OneTermEqualSelector("spec.nodeName", a.nodeName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return retryUnreachable(ctx, a.clock, func(ctx context.Context) (runtime.Object, error) {
				return a.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
			})
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return retryUnreachable(ctx, a.clock, func(ctx context.Context) (watch.Interface, error) {
				return a.client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
			})
		},
	}
	informer := cache.NewSharedIndexInformer(listThenWatch{lw}, &v1.Pod{}, 0, cache.Indexers{})
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { a.upsert(ctx, obj) },
		UpdateFunc: func(_, obj interface{}) { a.upsert(ctx, obj) },
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				a.out.remove(ctx, SourceAPI, pod)
			}
		},
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to watch pods")
		return
	}
	// The handler's own HasSynced, not the informer's: it turns true only once the handler has returned for
	// every pod of the initial list, so that each of them is in the update stream ahead of SourceSynced.
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			present := map[types.UID]bool{}
			for _, obj := range informer.GetStore().List() {
				if pod, ok := obj.(*v1.Pod); ok {
					present[pod.UID] = true
				}
			}
			a.out.reconcileOffline(ctx, present)
			a.out.markSynced(ctx, SourceAPI)
		}
	}()
	informer.RunWithContext(ctx)
}

// listThenWatch makes the reflector use a plain list and watch (resumed from the last resourceVersion)
// rather than a streaming watch-list, which not every API server (the bundled one) serves.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (a *apiSource) upsert(ctx context.Context, obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName != a.nodeName {
		return
	}
	pod = pod.DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if _, mirror := pod.Annotations[podfacts.AnnotationConfigMirror]; !mirror {
		pod.Annotations[podfacts.AnnotationConfigSource] = SourceAPI
	}
	a.out.upsert(ctx, SourceAPI, pod)
}
