package apiserver

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestSelectorsAndChunking(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	for i := 0; i < 5; i++ {
		p := testPod(fmt.Sprintf("p%d", i))
		if i%2 == 0 {
			p.Spec.NodeName = "n1"
			p.Labels["even"] = "true"
		}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.CoreV1().Pods("other").Create(ctx, testPod("p0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p1, _ := pods.Get(ctx, "p1", metav1.GetOptions{})
	p1.Status.Phase = corev1.PodRunning
	if _, err := pods.UpdateStatus(ctx, p1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, ns, label, field string
		want                   int
	}{
		{"all namespaces", "", "", "", 6},
		{"label", "default", "even=true", "", 3},
		{"label not", "default", "even!=true", "", 2},
		{"metadata.name", "", "", "metadata.name=p0", 2},
		{"metadata.namespace", "", "", "metadata.namespace=other", 1},
		{"spec.nodeName", "", "", "spec.nodeName=n1", 3},
		{"unbound", "default", "", "spec.nodeName=", 2},
		{"status.phase", "", "", "status.phase=Running", 1},
		{"both", "default", "even=true", "metadata.name=p2", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := ts.client.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: c.label, FieldSelector: c.field})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != c.want {
				t.Errorf("got %d items, want %d", len(l.Items), c.want)
			}
		})
	}
	if _, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("unknown field selector: want BadRequest, got %v", err)
	}
	var names []string
	opts := metav1.ListOptions{Limit: 2}
	for page := 0; ; page++ {
		l, err := pods.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Items {
			names = append(names, p.Name)
		}
		if l.Continue == "" {
			break
		}
		if page > 5 {
			t.Fatal("too many pages")
		}
		opts.Continue = l.Continue
	}
	if fmt.Sprint(names) != "[p0 p1 p2 p3 p4]" {
		t.Errorf("chunked list: %v", names)
	}
}

func TestPatchTypes(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, testPod("pp"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		pt    types.PatchType
		patch string
		sub   []string
		check func(*corev1.Pod) bool
	}{
		{"merge", types.MergePatchType, `{"metadata":{"labels":{"m":"1"}}}`, nil,
			func(p *corev1.Pod) bool { return p.Labels["m"] == "1" && p.Labels["app"] == "test" }},
		{"json", types.JSONPatchType, `[{"op":"add","path":"/metadata/labels/j","value":"2"}]`, nil,
			func(p *corev1.Pod) bool { return p.Labels["j"] == "2" }},
		{"strategic image", types.StrategicMergePatchType, `{"spec":{"containers":[{"name":"c","image":"localhost/busybox:2"}]}}`, nil,
			func(p *corev1.Pod) bool {
				return len(p.Spec.Containers) == 1 && p.Spec.Containers[0].Image == "localhost/busybox:2"
			}},
		{"strategic status", types.StrategicMergePatchType,
			`{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`, []string{"status"},
			func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && len(p.Status.Conditions) == 1 }},
		{"status ignored on main", types.MergePatchType, `{"status":{"phase":"Failed"}}`, nil,
			func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := pods.Patch(ctx, "pp", c.pt, []byte(c.patch), metav1.PatchOptions{}, c.sub...)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(p) {
				t.Errorf("patch not applied: %+v", p)
			}
		})
	}
	if _, err := pods.Patch(ctx, "pp", types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/name","value":"x"}]`), metav1.PatchOptions{}); err == nil {
		t.Error("failed json patch test op: want error")
	}
	if _, err := pods.Patch(ctx, "pp", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1"}}`), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("patch with stale resourceVersion: want Conflict, got %v", err)
	}
	if _, err := pods.Patch(ctx, "missing", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("patch missing: want NotFound, got %v", err)
	}
}

func TestGracefulDeletionAndFinalizers(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := testPod("g1")
	p.Spec.NodeName = "n1"
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "g1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "g1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bound pod must wait for its node: %v", err)
	}
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("deletion not marked: %+v", got.ObjectMeta)
	}
	if err := pods.Delete(ctx, "g1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
		Preconditions: &metav1.Preconditions{UID: &got.UID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "g1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod should be gone after grace 0: %v", err)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "f", Finalizers: []string{"example.com/hold"}}}
	cms := ts.client.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "f", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held, err := cms.Get(ctx, "f", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("finalizer must hold the object: %v", err)
	}
	held.Finalizers = nil
	if _, err := cms.Update(ctx, held, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("object should be gone once finalized: %v", err)
	}
}

func TestRestartPersistence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ctx := ctxT(t)
	p, err := ts.client.CoreV1().Pods("default").Create(ctx, testPod("keep"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Stop(); err != nil {
		t.Fatal(err)
	}
	ts2 := startServer(t, dir)
	got, err := ts2.client.CoreV1().Pods("default").Get(ctx, "keep", metav1.GetOptions{})
	if err != nil || got.UID != p.UID || got.ResourceVersion != p.ResourceVersion {
		t.Fatalf("after restart: %v %+v", err, got)
	}
	p2, err := ts2.client.CoreV1().Pods("default").Create(ctx, testPod("next"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rvLess(p2.ResourceVersion, p.ResourceVersion) || p2.ResourceVersion == p.ResourceVersion {
		t.Errorf("resourceVersion went backwards: %s after %s", p2.ResourceVersion, p.ResourceVersion)
	}
}

func rvLess(a, b string) bool {
	return len(a) < len(b) || len(a) == len(b) && a < b
}
