package apiserver

import (
	"context"
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

func TestDecideDependent(t *testing.T) {
	t.Parallel()
	ref := func(uid string) metav1.OwnerReference { return metav1.OwnerReference{UID: types.UID(uid)} }
	bg, fg, orphan := metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan
	for _, tc := range []struct {
		name       string
		refs       []metav1.OwnerReference
		states     []ownerState
		hasDeps    bool
		finalizers []string
		want       gcAction
	}{
		{"solid owner", []metav1.OwnerReference{ref("a")}, []ownerState{ownerSolid}, false, nil, gcAction{}},
		{"owner gone", []metav1.OwnerReference{ref("a")}, []ownerState{ownerAbsent}, false, nil, gcAction{Delete: &bg}},
		{"one of two gone", []metav1.OwnerReference{ref("a"), ref("b")}, []ownerState{ownerAbsent, ownerSolid}, false, nil,
			gcAction{Remove: []types.UID{"a"}}},
		{"all gone", []metav1.OwnerReference{ref("a"), ref("b")}, []ownerState{ownerAbsent, ownerAbsent}, false, nil, gcAction{Delete: &bg}},
		{"waiting owner, leaf", []metav1.OwnerReference{ref("a")}, []ownerState{ownerWaiting}, false, nil, gcAction{Delete: &bg}},
		{"waiting owner, has dependents", []metav1.OwnerReference{ref("a")}, []ownerState{ownerWaiting}, true, nil, gcAction{Delete: &fg}},
		{"waiting and solid", []metav1.OwnerReference{ref("a"), ref("b")}, []ownerState{ownerWaiting, ownerSolid}, true, nil,
			gcAction{Remove: []types.UID{"a"}}},
		{"own orphan finalizer", []metav1.OwnerReference{ref("a")}, []ownerState{ownerAbsent}, true,
			[]string{metav1.FinalizerOrphanDependents}, gcAction{Delete: &orphan}},
		{"own foreground finalizer", []metav1.OwnerReference{ref("a")}, []ownerState{ownerAbsent}, true,
			[]string{metav1.FinalizerDeleteDependents}, gcAction{Delete: &fg}},
		{"no references", nil, nil, false, nil, gcAction{}},
	} {
		if got := decideDependent(tc.refs, tc.states, tc.hasDeps, tc.finalizers); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func ownedBy(kind, name string, uid types.UID, block bool) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: name, UID: uid, BlockOwnerDeletion: ptr.To(block)}}
}

func gone(ctx context.Context, get func(context.Context, string, metav1.GetOptions) error, name string) func() bool {
	return func() bool { return apierrors.IsNotFound(get(ctx, name, metav1.GetOptions{})) }
}

func cmGetter(c kubernetes.Interface, ns string) func(context.Context, string, metav1.GetOptions) error {
	return func(ctx context.Context, n string, o metav1.GetOptions) error {
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, n, o)
		return err
	}
}

func podGetter(c kubernetes.Interface, ns string) func(context.Context, string, metav1.GetOptions) error {
	return func(ctx context.Context, n string, o metav1.GetOptions) error {
		_, err := c.CoreV1().Pods(ns).Get(ctx, n, o)
		return err
	}
}

func mustCM(t *testing.T, c kubernetes.Interface, name string, owners []metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps("default").Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func TestGCBackground(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	core := ts.client.CoreV1()
	if _, err := core.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner := mustCM(t, ts.client, "owner", nil)
	other := mustCM(t, ts.client, "other", nil)
	mustCM(t, ts.client, "dep", ownedBy("ConfigMap", "owner", owner.UID, false))
	both := ownedBy("ConfigMap", "owner", owner.UID, false)
	both = append(both, ownedBy("ConfigMap", "other", other.UID, false)...)
	mustCM(t, ts.client, "shared", both)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", OwnerReferences: ownedBy("ConfigMap", "owner", owner.UID, false)}}
	if _, err := core.Secrets("default").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := testPod("bound")
	bound.Spec.NodeName, bound.OwnerReferences = "n1", ownedBy("ConfigMap", "owner", owner.UID, false)
	unbound := testPod("unbound")
	unbound.OwnerReferences = ownedBy("ConfigMap", "owner", owner.UID, false)
	for _, p := range []*corev1.Pod{bound, unbound} {
		if _, err := core.Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// An owner of a kind not served here is never judged gone.
	foreign := testPod("foreign")
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"}}
	if _, err := core.Pods("default").Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := core.ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "dependent configmap collected", gone(ctx, cmGetter(ts.client, "default"), "dep"))
	eventually(t, "unbound pod collected", gone(ctx, podGetter(ts.client, "default"), "unbound"))
	eventually(t, "secret collected", func() bool {
		_, err := core.Secrets("default").Get(ctx, "s", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	eventually(t, "bound pod deleted gracefully", func() bool {
		p, err := core.Pods("default").Get(ctx, "bound", metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil && *p.DeletionGracePeriodSeconds == 30
	})
	eventually(t, "reference to the gone owner dropped", func() bool {
		cm, err := core.ConfigMaps("default").Get(ctx, "shared", metav1.GetOptions{})
		return err == nil && len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == other.UID
	})
	// The node confirms the pod's termination.
	if err := core.Pods("default").Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Pods("default").Get(ctx, "foreign", metav1.GetOptions{}); err != nil {
		t.Errorf("pod owned by a foreign kind: %v", err)
	}
}

func TestGCDanglingAndReplacedOwner(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	core := ts.client.CoreV1()
	// Created naming an owner that never existed: collected, as upstream.
	mustCM(t, ts.client, "dangling", ownedBy("ConfigMap", "nobody", "no-uid", false))
	eventually(t, "dangling dependent collected", gone(ctx, cmGetter(ts.client, "default"), "dangling"))
	// The owner's name now belongs to another object.
	owner := mustCM(t, ts.client, "owner", nil)
	if err := core.ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCM(t, ts.client, "owner", nil)
	mustCM(t, ts.client, "dep", ownedBy("ConfigMap", "owner", owner.UID, false))
	eventually(t, "dependent of the replaced owner collected", gone(ctx, cmGetter(ts.client, "default"), "dep"))
	if _, err := core.ConfigMaps("default").Get(ctx, "owner", metav1.GetOptions{}); err != nil {
		t.Errorf("new owner: %v", err)
	}
}

func TestGCClusterScopedOwner(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	node, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's Lease is owned by its Node.
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: NodeLeaseNS,
		OwnerReferences: ownedBy("Node", "n1", node.UID, false)}}
	leases := ts.client.CoordinationV1().Leases(NodeLeaseNS)
	if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ts.client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node lease collected", func() bool {
		_, err := leases.Get(ctx, "n1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func TestGCForeground(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	core := ts.client.CoreV1()
	if _, err := core.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner := mustCM(t, ts.client, "owner", nil)
	p := testPod("blocker")
	p.Spec.NodeName, p.OwnerReferences = "n1", ownedBy("ConfigMap", "owner", owner.UID, true)
	if _, err := core.Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCM(t, ts.client, "loose", ownedBy("ConfigMap", "owner", owner.UID, false))

	if err := core.ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	got, err := core.ConfigMaps("default").Get(ctx, "owner", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil || !reflect.DeepEqual(got.Finalizers, []string{metav1.FinalizerDeleteDependents}) {
		t.Fatalf("owner should wait with the foregroundDeletion finalizer: %v %+v", err, got.ObjectMeta)
	}
	eventually(t, "blocking pod deleted gracefully", func() bool {
		p, err := core.Pods("default").Get(ctx, "blocker", metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil
	})
	eventually(t, "non-blocking dependent collected", gone(ctx, cmGetter(ts.client, "default"), "loose"))
	if _, err := core.ConfigMaps("default").Get(ctx, "owner", metav1.GetOptions{}); err != nil {
		t.Fatalf("owner went before its blocking dependent: %v", err)
	}
	if err := core.Pods("default").Delete(ctx, "blocker", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "owner removed once its dependents are gone", gone(ctx, cmGetter(ts.client, "default"), "owner"))
}

func TestGCForegroundChain(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	top := mustCM(t, ts.client, "top", nil)
	mid := mustCM(t, ts.client, "mid", ownedBy("ConfigMap", "top", top.UID, true))
	mustCM(t, ts.client, "leaf", ownedBy("ConfigMap", "mid", mid.UID, true))
	if err := ts.client.CoreV1().ConfigMaps("default").Delete(ctx, "top", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"leaf", "mid", "top"} {
		eventually(t, n+" collected", gone(ctx, cmGetter(ts.client, "default"), n))
	}
}

func TestGCOrphan(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	core := ts.client.CoreV1()
	owner := mustCM(t, ts.client, "owner", nil)
	mustCM(t, ts.client, "dep", ownedBy("ConfigMap", "owner", owner.UID, true))
	if err := core.ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "owner removed", gone(ctx, cmGetter(ts.client, "default"), "owner"))
	dep, err := core.ConfigMaps("default").Get(ctx, "dep", metav1.GetOptions{})
	if err != nil || len(dep.OwnerReferences) != 0 {
		t.Fatalf("dependent should stay, orphaned: %v %+v", err, dep.OwnerReferences)
	}
	// An invalid policy is refused, as upstream.
	err = core.ConfigMaps("default").Delete(ctx, "dep", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletionPropagation("Sideways"))})
	if !apierrors.IsInvalid(err) {
		t.Errorf("invalid propagationPolicy: want 422, got %v", err)
	}
}

func TestOwnerKey(t *testing.T) {
	t.Parallel()
	g := newOwnerGraph(registry.New())
	for _, tc := range []struct {
		ns, apiVersion, kind, want string
		ok                         bool
	}{
		{"default", "v1", "ConfigMap", "configmaps/default/o", true},
		{"default", "v1", "Node", "nodes//o", true},
		{"", "v1", "Namespace", "namespaces//o", true},
		{"", "v1", "Pod", "", false}, // a cluster-scoped dependent cannot have a namespaced owner
		{"default", "events.k8s.io/v1", "Event", "events/default/o", true},
		{"default", "coordination.k8s.io/v1", "Lease", "leases/default/o", true},
		{"", "storage.k8s.io/v1", "CSINode", "csinodes//o", true},
		{"default", "apps/v1", "ReplicaSet", "", false},
		{"default", "a/b/c", "ConfigMap", "", false},
	} {
		got, ok := g.ownerKey(tc.ns, metav1.OwnerReference{APIVersion: tc.apiVersion, Kind: tc.kind, Name: "o"})
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s %s in %q: got %q %v, want %q %v", tc.apiVersion, tc.kind, tc.ns, got, ok, tc.want, tc.ok)
		}
	}
}
