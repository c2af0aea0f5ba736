//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// authzRead is one read of the node authzNode: what it must return (namespace/name of each object), or the
// kind of error it must fail with.
type authzRead struct {
	name string
	do   func(ctx context.Context, c rest.Interface) ([]string, error)
	want []string
	err  func(error) bool
}

// check returns what is wrong with a read's result, or "".
func (c authzRead) check(got []string, err error) string {
	if c.err != nil {
		if !c.err(err) {
			return fmt.Sprintf("want an error, got %v (returned %v)", err, got)
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("want %v, got %v", c.want, err)
	}
	if strings.Join(got, " ") != strings.Join(c.want, " ") {
		return fmt.Sprintf("returned %v, want %v", got, c.want)
	}
	return ""
}

func authzReadCases() []authzRead {
	ok := func(name string, do func(context.Context, rest.Interface) ([]string, error), want ...string) authzRead {
		return authzRead{name: name, do: do, want: want}
	}
	fails := func(name string, do func(context.Context, rest.Interface) ([]string, error), is func(error) bool) authzRead {
		return authzRead{name: name, do: do, err: is}
	}
	onNode := "spec.nodeName=" + authzNode
	return []authzRead{
		ok("named watch of own pod", authzWatch(true, "pods", "default", "authz-own", ""), "default/authz-own"),
		ok("watch of own pod by name selector", authzWatch(false, "pods", "default", "", "metadata.name=authz-own"),
			"default/authz-own"),
		ok("list of own pod by name selector", authzList("pods", "default", "metadata.name=authz-own", ""), "default/authz-own"),
		ok("named watch of own mirror pod", authzWatch(true, "pods", "kube-system", "authz-mirror", ""), "kube-system/authz-mirror"),
		ok("list of pods on the node", authzList("pods", "", onNode, ""), "default/authz-own", "kube-system/authz-mirror"),
		ok("watch of pods on the node", authzWatch(false, "pods", "", "", onNode), "default/authz-own", "kube-system/authz-mirror"),
		ok("list of pods on the node in another namespace", authzList("pods", "kube-system", onNode, ""), "kube-system/authz-mirror"),
		ok("list of pods on the node with a label selector", authzList("pods", "", onNode, "nothing=here")),
		ok("list of pods on the node with more field terms", authzList("pods", "", onNode+",metadata.namespace=kube-system", ""),
			"kube-system/authz-mirror"),
		ok("named watch of own node", authzWatch(true, "nodes", "", authzNode, ""), authzNode),
		ok("watch of own node by name selector", authzWatch(false, "nodes", "", "", "metadata.name="+authzNode), authzNode),
		ok("list of own node by name selector", authzList("nodes", "", "metadata.name="+authzNode, ""), authzNode),
		ok("named watch of a referenced secret", authzWatch(true, "secrets", "default", "authz-sec", ""), "default/authz-sec"),
		ok("list of a referenced secret by name selector", authzList("secrets", "default", "metadata.name=authz-sec", ""),
			"default/authz-sec"),
		fails("named watch of another node's pod", authzWatch(true, "pods", "default", "authz-own-b", ""), apierrors.IsForbidden),
		fails("named watch of another node's mirror pod", authzWatch(true, "pods", "kube-system", "authz-mirror-b", ""),
			apierrors.IsForbidden),
		fails("named watch of another node", authzWatch(true, "nodes", "", authzPrefixNode, ""), apierrors.IsForbidden),
		fails("list of pods on another node", authzList("pods", "", "spec.nodeName="+authzOtherNode, ""), apierrors.IsForbidden),
		fails("list of pods by label only", authzList("pods", "", "", "app=x"), apierrors.IsForbidden),
		fails("watch by path prefix with a node selector", authzWatch(true, "pods", "", "", onNode), apierrors.IsForbidden),
		fails("watch by path prefix with a name selector", authzWatch(true, "nodes", "", "", "metadata.name="+authzNode),
			apierrors.IsForbidden),
		fails("named watch with another name selected", authzWatch(true, "pods", "default", "authz-own", "metadata.name=authz-own-b"),
			apierrors.IsBadRequest),
		fails("named watch of another pod's secret", authzWatch(true, "secrets", "default", "authz-sec-b", ""), apierrors.IsForbidden),
	}
}

// authzList lists resource in ns (all namespaces if empty) with the given selectors.
func authzList(resource, ns, fieldSel, labelSel string) func(context.Context, rest.Interface) ([]string, error) {
	return func(ctx context.Context, c rest.Interface) ([]string, error) {
		req := c.Get().Namespace(ns).Resource(resource)
		if fieldSel != "" {
			req = req.Param("fieldSelector", fieldSel)
		}
		if labelSel != "" {
			req = req.Param("labelSelector", labelSel)
		}
		obj, err := req.Do(ctx).Get()
		if err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			return nil, err
		}
		return authzNames(items...), nil
	}
}

// authzWatch watches resource with ?watch=true, or by the /watch/ path prefix when pathPrefix is set (name
// then names one object), and returns the objects of the events that come until the stream is quiet. It
// watches from resourceVersion 0 (initial events from any version): kube-apiserver's watch cache answers a
// watch from the latest version with "Too large resource version" while it lags behind etcd.
func authzWatch(pathPrefix bool, resource, ns, name, fieldSel string) func(context.Context, rest.Interface) ([]string, error) {
	return func(ctx context.Context, c rest.Interface) ([]string, error) {
		req := c.Get()
		if pathPrefix {
			req = req.Prefix("watch")
		} else {
			req = req.Param("watch", "true")
		}
		req = req.Namespace(ns).Resource(resource).Param("resourceVersion", "0")
		if name != "" {
			req = req.Name(name)
		}
		if fieldSel != "" {
			req = req.Param("fieldSelector", fieldSel)
		}
		w, err := req.Watch(ctx)
		if err != nil {
			return nil, err
		}
		defer w.Stop()
		seen := map[string]bool{}
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return sortedSet(seen), nil
				}
				if ev.Type == watch.Error {
					return nil, apierrors.FromObject(ev.Object)
				}
				if ev.Type != watch.Bookmark {
					seen[authzNames(ev.Object)[0]] = true
				}
			case <-time.After(time.Second):
				return sortedSet(seen), nil
			}
		}
	}
}

func authzNames(objs ...runtime.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		acc, err := meta.Accessor(o)
		if err != nil {
			out = append(out, fmt.Sprintf("<%T>", o))
			continue
		}
		out = append(out, strings.TrimPrefix(acc.GetNamespace()+"/"+acc.GetName(), "/"))
	}
	sort.Strings(out)
	return out
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
