package kubeclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListerWatcher is what an informer lists and watches, built of a list and a watch call that may change the
// options (a field selector) first.
func ListerWatcher(list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	return listThenWatch{&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}}
}

// listThenWatch makes the reflector use a plain list and watch rather than a streaming watch-list, which not
// every API server (the bundled one) serves.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
