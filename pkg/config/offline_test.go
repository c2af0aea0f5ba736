package config

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// memCheckpoint is a PodCheckpoint in memory.
type memCheckpoint struct {
	mu   sync.Mutex
	pods map[types.UID]*v1.Pod
}

func (m *memCheckpoint) PutPod(p *v1.Pod) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods[p.UID] = p
	return nil
}

func (m *memCheckpoint) DeletePod(uid types.UID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
	return nil
}

func (m *memCheckpoint) Pods() ([]*v1.Pod, []error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*v1.Pod
	for _, p := range m.pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, []error{errors.New("checkpoint pods/x.json is damaged")}
}

func (m *memCheckpoint) names() []string {
	pods, _ := m.Pods()
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// Without its API server past the grace period, the node runs the checkpointed pods Runs selects, sent as
// the API source's, without ever saying the source synced; when the API server answers, a pod it no longer
// binds to the node is removed (with an event), the others are kept without an update, the pods it adds
// are added, and only then does the source say it synced. The checkpoint follows the API server.
func TestOfflineSource(t *testing.T) {
	checkpointed := func(name string) *v1.Pod {
		p := apiPod(name, "node1")
		p.Annotations = map[string]string{podfacts.AnnotationConfigSource: SourceAPI}
		return p
	}
	cp := &memCheckpoint{pods: map[types.UID]*v1.Pod{}}
	for _, name := range []string{"kept", "gone", "waits"} {
		_ = cp.PutPod(checkpointed(name))
	}
	client := fake.NewClientset(apiPod("kept", "node1"), apiPod("waits", "node1"), apiPod("new", "node1"))
	var away atomic.Bool
	away.Store(true)
	client.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if away.Load() {
			return true, nil, syscall.ECONNREFUSED
		}
		return false, nil, nil
	})
	rec := record.NewFakeRecorder(10)
	s, err := NewSources(Options{NodeName: "node1", Client: kubeclienttest.Wrap(client), Recorder: rec, Checkpoint: cp,
		Offline: Offline{Grace: 50 * time.Millisecond, Runs: func(p *v1.Pod) bool { return p.Name != "waits" }}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := make(chan struct{})
	go func() { s.Run(ctx); close(running) }()

	var offline []string
	for i := 0; i < 2; i++ {
		u := next(t, s)
		if u.Op != Add || u.Source != SourceAPI {
			t.Fatalf("offline update %s from %s", u.Op, u.Source)
		}
		offline = append(offline, u.Pods[0].Name)
	}
	sort.Strings(offline)
	if offline[0] != "gone" || offline[1] != "kept" {
		t.Fatalf("ran offline %v, want gone and kept", offline)
	}
	none(t, s)
	if st, ok := s.Offline(); !ok || len(st.Pods) != 2 || st.Pods[0] != "ns/gone" || s.Synced() {
		t.Fatalf("offline state %+v %v, synced %v", st, ok, s.Synced())
	}

	away.Store(false)
	got := map[string]Op{}
	for {
		u := next(t, s)
		if u.Op == SourceSynced {
			break
		}
		if u.Op != Reconcile { // the API's copy of kept may differ from the checkpoint's in status only
			got[u.Pods[0].Name] = u.Op
		}
	}
	if len(got) != 3 || got["new"] != Add || got["waits"] != Add || got["gone"] != Remove {
		t.Errorf("updates once the API server answered: %v; want new and waits added, gone removed", got)
	}
	if _, ok := s.Offline(); ok || !s.Synced() {
		t.Errorf("still offline, or not synced")
	}
	select {
	case e := <-rec.Events:
		if e == "" {
			t.Error("empty event")
		}
	default:
		t.Error("no event for the pod stopped")
	}
	cancel() // the checkpoint's writer writes what is queued before Run returns
	<-running
	names := cp.names()
	if len(names) != 3 || names[0] != "kept" || names[1] != "new" || names[2] != "waits" {
		t.Errorf("the checkpoint holds %v, want kept, new and waits", names)
	}
}

// A pod the API server delivers after its initial list was read, but before that list is reconciled with
// the checkpoint (bound just as the node starts), is neither removed nor dropped from the checkpoint: only
// a pod that ran from the checkpoint can be no longer bound.
func TestReconcileOfflineKeepsPodsDeliveredSinceTheList(t *testing.T) {
	cp := &memCheckpoint{pods: map[types.UID]*v1.Pod{}}
	rec := record.NewFakeRecorder(10)
	s, err := NewSources(Options{NodeName: "node1", Recorder: rec, Checkpoint: cp})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	late := apiPod("late", "node1")
	s.upsert(ctx, SourceAPI, late)
	if u := next(t, s); u.Op != Add || u.Pods[0].Name != "late" {
		t.Fatalf("update %s %s, want late added", u.Op, u.Pods[0].Name)
	}
	s.reconcileOffline(ctx, map[types.UID]bool{}) // the list, read before late arrived
	none(t, s)
	if names := cp.names(); len(names) != 1 || names[0] != "late" {
		t.Errorf("the checkpoint holds %v, want late", names)
	}
	select {
	case e := <-rec.Events:
		t.Errorf("event %q for a pod the API server binds to the node", e)
	default:
	}
}
