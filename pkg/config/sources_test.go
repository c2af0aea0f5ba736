package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

func apiPod(name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "x"}}},
	}
}

func next(t *testing.T, s *Sources) PodUpdate {
	t.Helper()
	select {
	case u := <-s.Updates():
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update")
	}
	return PodUpdate{}
}

func none(t *testing.T, s *Sources) {
	t.Helper()
	select {
	case u := <-s.Updates():
		t.Fatalf("unexpected update %s %s", u.Op, u.Pods[0].Name)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestClassify(t *testing.T) {
	base := apiPod("a", "n")
	now := metav1.Now()
	mod := func(f func(p *v1.Pod)) *v1.Pod { p := base.DeepCopy(); f(p); return p }
	tests := []struct {
		name    string
		old     *v1.Pod
		cur     *v1.Pod
		op      Op
		changed bool
	}{
		{"new", nil, base, Add, true},
		{"same", base, base.DeepCopy(), Update, false},
		{"resourceVersion only", base, mod(func(p *v1.Pod) { p.ResourceVersion = "9" }), Update, false},
		{"spec", base, mod(func(p *v1.Pod) { p.Spec.Containers[0].Image = "y" }), Update, true},
		{"labels", base, mod(func(p *v1.Pod) { p.Labels = map[string]string{"a": "b"} }), Update, true},
		{"deletion", base, mod(func(p *v1.Pod) { p.DeletionTimestamp = &now }), Delete, true},
		{"status", base, mod(func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }), Reconcile, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op, changed := classify(tc.old, tc.old != nil, tc.cur)
			if op != tc.op || changed != tc.changed {
				t.Errorf("classify = %s %v, want %s %v", op, changed, tc.op, tc.changed)
			}
		})
	}
}

func TestAPISource(t *testing.T) {
	client := fake.NewClientset(apiPod("mine", "node1"), apiPod("theirs", "node2"))
	s, err := NewSources(Options{NodeName: "node1", Client: kubeclienttest.Wrap(client)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	if u := next(t, s); u.Op != Add || u.Pods[0].Name != "mine" || u.Pods[0].Annotations[podfacts.AnnotationConfigSource] != SourceAPI {
		t.Fatalf("first update %s %v", u.Op, u.Pods[0].ObjectMeta)
	}
	if u := next(t, s); u.Op != SourceSynced || u.Source != SourceAPI || !s.Synced() {
		t.Fatalf("second update %s from %q, synced %v; want the API source's SourceSynced", u.Op, u.Source, s.Synced())
	}
	none(t, s)

	pods := client.CoreV1().Pods("ns")
	p, _ := pods.Get(ctx, "mine", metav1.GetOptions{})
	p.Status.Phase = v1.PodRunning
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := next(t, s); u.Op != Reconcile {
		t.Fatalf("status change gave %s", u.Op)
	}
	p, _ = pods.Get(ctx, "mine", metav1.GetOptions{})
	p.Labels = map[string]string{"x": "y"}
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := next(t, s); u.Op != Update {
		t.Fatalf("label change gave %s", u.Op)
	}
	if err := pods.Delete(ctx, "mine", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := next(t, s); u.Op != Remove || u.Pods[0].Name != "mine" {
		t.Fatalf("delete gave %s", u.Op)
	}
}

// SourceSynced comes behind every pod of the initial list, however many there are, and only once: a receiver
// that has seen it has applied the whole list (and may treat what it runs beyond that list as orphans).
func TestAPISourceSyncedComesBehindTheInitialList(t *testing.T) {
	var objs []runtime.Object
	for i := 0; i < 200; i++ {
		objs = append(objs, apiPod(fmt.Sprintf("p%03d", i), "node1"))
	}
	client := fake.NewClientset(objs...)
	// The fake's watch replays nothing it missed: the pod created below must come after the source's watch
	// is registered, which this reactor tells (it registers the watch itself, then says so).
	watching := make(chan struct{}, 1)
	client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		select {
		case watching <- struct{}{}:
		default:
		}
		return true, w, err
	})
	s, err := NewSources(Options{NodeName: "node1", Client: kubeclienttest.Wrap(client)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	adds := 0
	for {
		u := next(t, s)
		if u.Op == SourceSynced {
			break
		}
		if u.Op != Add {
			t.Fatalf("update %s before SourceSynced", u.Op)
		}
		adds++
	}
	if adds != 200 {
		t.Fatalf("SourceSynced after %d of 200 pods", adds)
	}
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the API source never watched pods")
	}
	pods := client.CoreV1().Pods("ns")
	if _, err := pods.Create(ctx, apiPod("late", "node1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := next(t, s); u.Op != Add || u.Pods[0].Name != "late" {
		t.Fatalf("got %s, want the new pod and no second SourceSynced", u.Op)
	}
}

func TestReplaceRepeatsNothing(t *testing.T) {
	s, _ := NewSources(Options{NodeName: "n"})
	ctx := context.Background()
	a, b := apiPod("a", "n"), apiPod("b", "n")
	go s.replace(ctx, SourceFile, []*v1.Pod{a, b})
	next(t, s)
	next(t, s)
	go s.replace(ctx, SourceFile, []*v1.Pod{a.DeepCopy(), b.DeepCopy()})
	none(t, s)
	go s.replace(ctx, SourceFile, []*v1.Pod{a})
	if u := next(t, s); u.Op != Remove || u.Pods[0].Name != "b" {
		t.Fatalf("got %s %s", u.Op, u.Pods[0].Name)
	}
}

func TestFileSource(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yaml", goodManifest)
	write("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\n")
	write(".hidden.yaml", goodManifest)
	rec := record.NewFakeRecorder(10)
	s, _ := NewSources(Options{NodeName: "node1", ManifestDir: dir, Recorder: rec})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	u := next(t, s)
	if u.Op != Add || u.Pods[0].Name != "web-node1" {
		t.Fatalf("first update %s %s", u.Op, u.Pods[0].Name)
	}
	// The source counts as synced once its first listing is delivered, and says so behind it.
	if u := next(t, s); u.Op != SourceSynced || u.Source != SourceFile || !s.Synced() {
		t.Fatalf("second update %s from %q, synced %v; want the file source's SourceSynced", u.Op, u.Source, s.Synced())
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "bad.yaml") || !strings.Contains(e, "at least one container") {
			t.Errorf("event %q", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event for the bad manifest")
	}
	uid := u.Pods[0].UID

	// An edit makes a new pod (new UID): the old one is removed, the new one added.
	write("web.yaml", strings.Replace(goodManifest, "1.35", "1.36", 1))
	got := map[Op]bool{}
	for i := 0; i < 2; i++ {
		u := next(t, s)
		got[u.Op] = true
		if u.Op == Remove && u.Pods[0].UID != uid {
			t.Errorf("removed %s, want the old pod", u.Pods[0].UID)
		}
	}
	if !got[Add] || !got[Remove] {
		t.Fatalf("edit gave %v", got)
	}
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	if u := next(t, s); u.Op != Remove {
		t.Fatalf("file removal gave %s", u.Op)
	}
}

func TestMirrorClient(t *testing.T) {
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "node-uid"}})
	static, err := DecodeManifest([]byte(goodManifest), "/m/web.yaml", "node1")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMirrorClient(kubeclienttest.Wrap(client), "node1")
	ctx := context.Background()
	if err := m.CreateMirror(ctx, static); err != nil {
		t.Fatal(err)
	}
	mirror, err := client.CoreV1().Pods("default").Get(ctx, "web-node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mirror.Annotations[podfacts.AnnotationConfigMirror] != string(static.UID) || mirror.Spec.NodeName != "node1" ||
		len(mirror.OwnerReferences) != 1 || mirror.OwnerReferences[0].UID != "node-uid" || mirror.UID == static.UID {
		t.Errorf("mirror %+v", mirror.ObjectMeta)
	}
	if err := m.DeleteMirror(ctx, "default", "web-node1", ""); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			if g := d.GetDeleteOptions().GracePeriodSeconds; g == nil || *g != 0 {
				t.Errorf("mirror deleted with grace %v", g)
			}
		}
	}
	if err := m.DeleteMirror(ctx, "default", "web-node1", ""); err != nil {
		t.Errorf("deleting a missing mirror: %v", err)
	}
}
