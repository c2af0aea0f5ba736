package apiserver

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

func TestWatchResumeAndGone(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	p, err := pods.Create(ctx, testPod("w1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	p.Labels["v"] = "2"
	p2, err := pods.Update(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, w)
	if ev.Type != watch.Modified || ev.Object.(*corev1.Pod).ResourceVersion != p2.ResourceVersion {
		t.Fatalf("got %s %v", ev.Type, ev.Object)
	}
	if err := pods.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev.Type != watch.Deleted {
		t.Fatalf("want DELETED, got %s", ev.Type)
	}
	// Resume from the first version: both changes replay.
	w2, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w2); ev.Type != watch.Modified {
		t.Fatalf("resume: want MODIFIED, got %s", ev.Type)
	}
	if ev := nextEvent(t, w2); ev.Type != watch.Deleted {
		t.Fatalf("resume: want DELETED, got %s", ev.Type)
	}
	w2.Stop()
	// Push the window (50 events) past the first version.
	for i := 0; i < 60; i++ {
		if _, err := ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = pods.Watch(ctx, metav1.ListOptions{ResourceVersion: p.ResourceVersion})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("want 410 Gone, got %v", err)
	}
}

func TestWatchSelectorTransitionsAndBookmarks(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *Config) { c.BookmarkInterval = 200 * time.Millisecond })
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "app=test,tier=web", AllowWatchBookmarks: true,
		ResourceVersion: fmt.Sprint(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	p, err := pods.Create(ctx, testPod("s1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["tier"] = "web"
	if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ev watch.Event
	for ev = nextEvent(t, w); ev.Type == watch.Bookmark; ev = nextEvent(t, w) {
	}
	if ev.Type != watch.Added {
		t.Fatalf("entering selection: want ADDED, got %s", ev.Type)
	}
	delete(p.Labels, "tier")
	if _, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for ev = nextEvent(t, w); ev.Type == watch.Bookmark; ev = nextEvent(t, w) {
	}
	if ev.Type != watch.Deleted {
		t.Fatalf("leaving selection: want DELETED, got %s", ev.Type)
	}
	if ev = nextEvent(t, w); ev.Type != watch.Bookmark {
		t.Fatalf("want BOOKMARK, got %s", ev.Type)
	}
}

// TestInformer runs client-go's informer (watch-list with initial events and
// its bookmark) against the server.
func TestInformer(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	if _, err := ts.client.CoreV1().Pods("default").Create(ctx, testPod("i1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(ts.client, 0)
	inf := f.Core().V1().Pods().Informer()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if _, err := ts.client.CoreV1().Pods("default").Create(ctx, testPod("i2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(inf.GetStore().List()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("informer has %d pods", len(inf.GetStore().List()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
