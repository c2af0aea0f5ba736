//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeagent/kubelet/pkg/apiserver"
)

// crashWriters is how many clients write at once while the API server is killed.
const crashWriters = 16

// crashWrite is one write a writer attempted: the configmap, the sequence number it wrote into it, and,
// when acknowledged (2xx), the resourceVersion it got.
type crashWrite struct {
	name  string
	seq   int
	acked bool
	rv    uint64
}

// crashWriter creates configmaps and updates each a few times, recording every attempt, until ctx ends or
// the server stops answering.
func crashWriter(ctx context.Context, srv *apiserverProc, id int, out chan<- crashWrite) {
	cms := srv.client.CoreV1().ConfigMaps("default")
	for k := 0; ; k++ {
		name := fmt.Sprintf("w%02d-%04d", id, k)
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for seq := 0; seq < 4; seq++ {
			if ctx.Err() != nil {
				return
			}
			cm.Data = map[string]string{"seq": strconv.Itoa(seq), "writer": strconv.Itoa(id)}
			var got *v1.ConfigMap
			var err error
			if seq == 0 {
				got, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			} else {
				got, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			}
			w := crashWrite{name: name, seq: seq}
			if err == nil {
				w.acked = true
				w.rv, _ = strconv.ParseUint(got.ResourceVersion, 10, 64)
				cm = got
			}
			out <- w
			if err != nil {
				return // the server is gone: nothing more is acknowledged
			}
		}
	}
}

// crashEvent is what the watch saw: a configmap at a resourceVersion with its sequence number.
type crashEvent struct {
	name string
	seq  int
	rv   uint64
}

// collectWatch records the events of w until it ends.
func collectWatch(w watch.Interface) []crashEvent {
	var out []crashEvent
	for ev := range w.ResultChan() {
		cm, ok := ev.Object.(*v1.ConfigMap)
		if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
			continue
		}
		rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		seq, _ := strconv.Atoi(cm.Data["seq"])
		out = append(out, crashEvent{name: cm.Name, seq: seq, rv: rv})
	}
	return out
}

// The API server killed with SIGKILL in the middle of 16 clients' writes loses none it acknowledged, and
// nothing a watcher saw; after a restart on the same data its resourceVersions go on above every one it
// handed out, and a watch from before the crash resumes without a gap or is told 410 Gone.
func TestApiserverCrashKeepsAcknowledgedWrites(t *testing.T) {
	srv := startAPIServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start, err := srv.client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startRV, _ := strconv.ParseUint(start.ResourceVersion, 10, 64)
	w, err := srv.client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	watched := make(chan []crashEvent, 1)
	go func() { watched <- collectWatch(w) }()

	writes := make(chan crashWrite, 1<<16)
	var wg sync.WaitGroup
	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	for i := 0; i < crashWriters; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			crashWriter(wctx, srv, i, writes)
		}(i)
	}
	time.Sleep(2 * time.Second) // writes in full flow
	srv.kill()
	wg.Wait()
	close(writes)
	events := <-watched

	// What each configmap must hold after the restart: at least its last acknowledged write, at most its
	// last attempted one (a write cut off by the kill may have been stored, unacknowledged).
	type bounds struct{ lastAcked, lastTried int }
	want := map[string]*bounds{}
	var acked int
	var maxRV uint64
	for w := range writes {
		b := want[w.name]
		if b == nil {
			b = &bounds{lastAcked: -1}
			want[w.name] = b
		}
		b.lastTried = max(b.lastTried, w.seq)
		if w.acked {
			acked++
			b.lastAcked = max(b.lastAcked, w.seq)
			maxRV = max(maxRV, w.rv)
		}
	}
	if acked == 0 {
		t.Fatal("no write was acknowledged before the kill")
	}

	srv.start()
	list, err := srv.client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, cm := range list.Items {
		if cm.Name == apiserver.RootCAConfigMap { // published in every namespace, not written by the test
			continue
		}
		seq, err := strconv.Atoi(cm.Data["seq"])
		if err != nil {
			t.Errorf("%s: stored content %v", cm.Name, cm.Data)
		}
		stored[cm.Name] = seq
	}
	found, lost := 0, 0
	for name, b := range want {
		seq, ok := stored[name]
		switch {
		case b.lastAcked < 0 && !ok:
		case !ok || seq < b.lastAcked:
			lost += b.lastAcked + 1
			t.Errorf("%s: acknowledged up to write %d, found %v (present %v)", name, b.lastAcked, seq, ok)
		case seq > b.lastTried:
			t.Errorf("%s: holds write %d, never attempted (last %d)", name, seq, b.lastTried)
		default:
			found += b.lastAcked + 1 // the acknowledged writes to it, the last of which it holds
		}
	}
	fmt.Printf("census: apiserver crash: %d writes acknowledged by %d writers, %d found after restart, %d lost; "+
		"%d events watched before the kill\n", acked, crashWriters, found, lost, len(events))

	// Whatever a watcher saw was committed: it is there after the restart, and its versions only grew.
	var last uint64
	for _, ev := range events {
		if ev.rv <= last {
			t.Errorf("watch event %s at %d after %d", ev.name, ev.rv, last)
		}
		last = ev.rv
		if seq, ok := stored[ev.name]; !ok || seq < ev.seq {
			t.Errorf("watched %s at write %d, after restart %v (present %v)", ev.name, ev.seq, seq, ok)
		}
	}

	// A new write gets a version above every one handed out before the crash.
	after, err := srv.client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-crash"}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	afterRV, _ := strconv.ParseUint(after.ResourceVersion, 10, 64)
	if afterRV <= maxRV || afterRV <= last {
		t.Errorf("resourceVersion after restart %d, not above %d (acknowledged) and %d (watched)", afterRV, maxRV, last)
	}

	// A watch from before the crash: no gap, or 410 Gone.
	rw, err := srv.client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatUint(startRV, 10)})
	var st apierrors.APIStatus
	switch {
	case err != nil && errors.As(err, &st) && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)):
		t.Logf("watch from %d after the restart: %v", startRV, err)
	case err != nil:
		t.Fatalf("watch from %d after the restart: %v", startRV, err)
	default:
		defer rw.Stop()
		seen := map[string]int{}
		timeout := time.After(30 * time.Second)
		for done := false; !done; {
			select {
			case ev, ok := <-rw.ResultChan():
				if !ok {
					t.Fatal("resumed watch ended")
				}
				if ev.Type == watch.Error {
					if !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) && !apierrors.IsGone(apierrors.FromObject(ev.Object)) {
						t.Fatalf("resumed watch: %v", ev.Object)
					}
					t.Logf("resumed watch ended with 410 Gone")
					return
				}
				cm := ev.Object.(*v1.ConfigMap)
				seq, _ := strconv.Atoi(cm.Data["seq"])
				seen[cm.Name] = max(seen[cm.Name], seq)
				done = cm.Name == "after-crash"
			case <-timeout:
				t.Fatal("resumed watch did not reach the write after the restart")
			}
		}
		for name, seq := range stored {
			if name != "after-crash" && seen[name] != seq {
				t.Errorf("resumed watch: %s seen at write %d, stored at %d (a gap)", name, seen[name], seq)
			}
		}
	}
}
