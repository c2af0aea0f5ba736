package apiserver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// isolationRead is one read a node makes, and what it must return: the namespace/name of every object,
// or an error of the given kind.
type isolationRead struct {
	name string
	do   func(ctx context.Context, c rest.Interface) ([]string, error)
	want []string
	err  func(error) bool
}

// readList lists resource in ns (all namespaces if empty) with the given selectors.
func readList(resource, ns, fieldSel, labelSel string) func(context.Context, rest.Interface) ([]string, error) {
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
		return objectNames(items...), nil
	}
}

// readWatch watches resource as ?watch=true with the given selectors, or by the /watch/ path prefix when
// pathPrefix is set (name then names one object), and returns the objects of the initial events.
func readWatch(pathPrefix bool, resource, ns, name, fieldSel string) func(context.Context, rest.Interface) ([]string, error) {
	return func(ctx context.Context, c rest.Interface) ([]string, error) {
		req := c.Get()
		if pathPrefix {
			req = req.Prefix("watch")
		} else {
			req = req.Param("watch", "true")
		}
		req = req.Namespace(ns).Resource(resource)
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
		return watchedNames(w, 500*time.Millisecond)
	}
}

// watchedNames collects the objects of a watch's events until none came for quiet.
func watchedNames(w watch.Interface, quiet time.Duration) ([]string, error) {
	seen := map[string]bool{}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return sortedKeys(seen), nil
			}
			if ev.Type == watch.Error {
				return nil, apierrors.FromObject(ev.Object)
			}
			if ev.Type != watch.Bookmark {
				seen[objectNames(ev.Object)[0]] = true
			}
		case <-time.After(quiet):
			return sortedKeys(seen), nil
		}
	}
}

func objectNames(objs ...runtime.Object) []string {
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

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// isolationFixtures creates nodes n1, n10 and n2 and pods whose names share prefixes across nodes and
// namespaces: n1 runs default/web and the mirror pod kube-system/mirror-n1; n2 runs default/web-2 (with a
// secret in its env), kube-system/mirror-n1-b and kube-system/web; n10 runs default/webx.
func isolationFixtures(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	for _, n := range []string{"n1", "n10", "n2"} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"sec", "sec-2"} {
		if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s},
			StringData: map[string]string{"k": "value of " + s}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(ns, name, node, secret string, mirror bool) {
		p := testPod(name)
		p.Namespace, p.Spec.NodeName = ns, node
		p.Labels = map[string]string{"app": strings.TrimSuffix(name, "-2")}
		if mirror {
			p.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
		}
		if secret != "" {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "k"}}}}
		}
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("default", "web", "n1", "sec", false)
	pod("default", "web-2", "n2", "sec-2", false)
	pod("default", "webx", "n10", "", false)
	pod("kube-system", "mirror-n1", "n1", "", true)
	pod("kube-system", "mirror-n1-b", "n2", "", true)
	pod("kube-system", "web", "n2", "", false)
}

// isolationReads are node n1's reads of the fixtures and what each must return.
func isolationReads() []isolationRead {
	ok := func(name string, do func(context.Context, rest.Interface) ([]string, error), want ...string) isolationRead {
		return isolationRead{name: name, do: do, want: want}
	}
	fails := func(name string, do func(context.Context, rest.Interface) ([]string, error), is func(error) bool) isolationRead {
		return isolationRead{name: name, do: do, err: is}
	}
	return []isolationRead{
		ok("named watch of own pod", readWatch(true, "pods", "default", "web", ""), "default/web"),
		ok("watch of own pod by name selector", readWatch(false, "pods", "default", "", "metadata.name=web"), "default/web"),
		ok("list of own pod by name selector", readList("pods", "default", "metadata.name=web", ""), "default/web"),
		ok("named watch of own mirror pod", readWatch(true, "pods", "kube-system", "mirror-n1", ""), "kube-system/mirror-n1"),
		ok("list of own mirror pod by name selector", readList("pods", "kube-system", "metadata.name=mirror-n1", ""),
			"kube-system/mirror-n1"),
		ok("list of pods on the node", readList("pods", "", "spec.nodeName=n1", ""), "default/web", "kube-system/mirror-n1"),
		ok("watch of pods on the node", readWatch(false, "pods", "", "", "spec.nodeName=n1"), "default/web", "kube-system/mirror-n1"),
		ok("list of pods on the node in another namespace", readList("pods", "kube-system", "spec.nodeName=n1", ""),
			"kube-system/mirror-n1"),
		ok("watch of pods on the node in another namespace", readWatch(false, "pods", "kube-system", "", "spec.nodeName=n1"),
			"kube-system/mirror-n1"),
		ok("list of pods on the node with a label selector", readList("pods", "", "spec.nodeName=n1", "app=web"), "default/web"),
		ok("list of pods on the node with more field terms", readList("pods", "", "spec.nodeName=n1,metadata.namespace=kube-system", ""),
			"kube-system/mirror-n1"),
		ok("named watch of own node", readWatch(true, "nodes", "", "n1", ""), "n1"),
		ok("watch of own node by name selector", readWatch(false, "nodes", "", "", "metadata.name=n1"), "n1"),
		ok("list of own node by name selector", readList("nodes", "", "metadata.name=n1", ""), "n1"),
		ok("named watch of a referenced secret", readWatch(true, "secrets", "default", "sec", ""), "default/sec"),
		ok("list of a referenced secret by name selector", readList("secrets", "default", "metadata.name=sec", ""), "default/sec"),
		fails("named watch of another node's pod", readWatch(true, "pods", "default", "web-2", ""), apierrors.IsForbidden),
		fails("named watch of another node's mirror pod", readWatch(true, "pods", "kube-system", "mirror-n1-b", ""), apierrors.IsForbidden),
		fails("named watch of another node", readWatch(true, "nodes", "", "n10", ""), apierrors.IsForbidden),
		fails("list of pods on another node", readList("pods", "", "spec.nodeName=n2", ""), apierrors.IsForbidden),
		fails("list of pods by label only", readList("pods", "", "", "app=web"), apierrors.IsForbidden),
		fails("watch by path prefix with a node selector", readWatch(true, "pods", "", "", "spec.nodeName=n1"), apierrors.IsForbidden),
		fails("watch by path prefix with a name selector", readWatch(true, "nodes", "", "", "metadata.name=n1"), apierrors.IsForbidden),
		fails("named watch with another name selected", readWatch(true, "pods", "default", "web", "metadata.name=web-2"),
			apierrors.IsBadRequest),
		fails("named watch of another pod's secret", readWatch(true, "secrets", "default", "sec-2", ""), apierrors.IsForbidden),
		fails("list of secrets by another selector", readList("secrets", "default", "metadata.namespace=default", ""), apierrors.IsForbidden),
	}
}

// A node's reads return the objects it may read and nothing else: a named watch or a name selector never
// returns objects whose names merely start with the name, in any namespace and of any kind.
func TestNodeIsolationOfReads(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	isolationFixtures(t, ctx, ts.client)
	rc, err := ts.NodeClientConfig("n1")
	if err != nil {
		t.Fatal(err)
	}
	node := kubernetes.NewForConfigOrDie(rc).CoreV1().RESTClient()
	for _, c := range isolationReads() {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.do(ctx, node)
			if c.err != nil {
				if !c.err(err) {
					t.Fatalf("want an error, got %v (returned %v)", err, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("want %v, got %v", c.want, err)
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Fatalf("returned %v, want %v", got, c.want)
			}
		})
	}
}
