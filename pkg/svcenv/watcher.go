package svcenv

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// ErrNotSynced is returned for a pod from the API while the Services have never been listed: its
// containers wait (CreateContainerConfigError, retried) rather than start without KUBERNETES_SERVICE_HOST.
var ErrNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")

// Watcher holds the cluster's Services, kept current by a list and watch.
type Watcher struct {
	informer cache.SharedIndexInformer
}

// NewWatcher returns a Watcher of all namespaces' Services; Run starts it.
func NewWatcher(client kubeclient.Interface) *Watcher {
	services := client.CoreV1().Services(metav1.NamespaceAll)
	lw := kubeclient.ListerWatcher(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return services.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return services.Watch(ctx, o)
		})
	return &Watcher{informer: cache.NewSharedIndexInformer(lw, &v1.Service{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
}

// Run keeps the Services current until ctx ends.
func (w *Watcher) Run(ctx context.Context) { w.informer.RunWithContext(ctx) }

// Env returns the service variables of pod. A static pod never waits for the API: it gets what is known.
func (w *Watcher) Env(pod *v1.Pod) (map[string]string, error) {
	if !w.informer.HasSynced() && !podfacts.IsStatic(pod) {
		return nil, ErrNotSynced
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	var objs []interface{}
	if links {
		objs, _ = w.informer.GetIndexer().ByIndex(cache.NamespaceIndex, pod.Namespace)
	}
	for name := range masterServices {
		if obj, ok, _ := w.informer.GetStore().GetByKey(metav1.NamespaceDefault + "/" + name); ok {
			objs = append(objs, obj)
		}
	}
	services := make([]*v1.Service, 0, len(objs))
	for _, obj := range objs {
		if s, ok := obj.(*v1.Service); ok {
			services = append(services, s)
		}
	}
	return ForPod(services, pod.Namespace, links), nil
}
