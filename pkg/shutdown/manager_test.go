package shutdown

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func pod(name string, prio int32, grace int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{Priority: ptr.To(prio), TerminationGracePeriodSeconds: ptr.To(grace)}}
}

func TestGroups(t *testing.T) {
	g := Groups(30*time.Second, 10*time.Second, nil)
	if len(g) != 2 || g[0].Priority != 0 || g[0].Period != 20*time.Second || g[1].Priority != SystemCriticalPriority || g[1].Period != 10*time.Second {
		t.Errorf("from the two periods: %+v", g)
	}
	if Budget(g) != 30*time.Second {
		t.Errorf("budget %v", Budget(g))
	}
	if g := Groups(0, 0, nil); len(g) != 0 {
		t.Errorf("off: %+v", g)
	}
	g = Groups(0, 0, []kubeletconfig.ShutdownGracePeriodByPodPriority{
		{Priority: 100000, ShutdownGracePeriodSeconds: 5}, {Priority: 0, ShutdownGracePeriodSeconds: 20}, {Priority: 2000000000, ShutdownGracePeriodSeconds: 7}})
	if len(g) != 3 || g[0].Priority != 0 || g[1].Priority != 100000 || g[2].Period != 7*time.Second || Budget(g) != 32*time.Second {
		t.Errorf("by priority, sorted: %+v", g)
	}
	assigned := Assign(g, []*v1.Pod{pod("low", -5, 30), pod("zero", 0, 30), pod("mid", 150000, 30), pod("crit", 2000001000, 30),
		{ObjectMeta: metav1.ObjectMeta{Name: "nil-priority"}}})
	names := func(ps []*v1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		sort.Strings(out)
		return out
	}
	for i, want := range [][]string{{"low", "nil-priority", "zero"}, {"mid"}, {"crit"}} {
		if got := names(assigned[i].Pods); len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) {
			t.Errorf("group %d: %v, want %v", i, got, want)
		}
	}
}

// fakeLogind is logind for tests: a settable delay, a lock count and a signal channel.
type fakeLogind struct {
	mu       sync.Mutex
	delay    time.Duration
	setTo    time.Duration
	locks    int
	released int
	signals  chan bool
	failSet  bool
}

func (f *fakeLogind) InhibitDelayMax() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay, nil
}
func (f *fakeLogind) SetInhibitDelayMax(d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failSet {
		return errors.New("read-only file system")
	}
	f.setTo, f.delay = d, d
	return nil
}
func (f *fakeLogind) Inhibit() (func() error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.locks++
	return func() error { f.mu.Lock(); f.released++; f.mu.Unlock(); return nil }, nil
}
func (f *fakeLogind) PrepareForShutdown(context.Context) (<-chan bool, error) { return f.signals, nil }

func TestShutdown(t *testing.T) {
	l := &fakeLogind{delay: 5 * time.Second, signals: make(chan bool)}
	var mu sync.Mutex
	var killed []string
	graces := map[string]time.Duration{}
	done := make(chan struct{}, 4)
	changes := 0
	m, err := New(Config{Logind: l, Groups: Groups(30*time.Second, 10*time.Second, nil),
		Pods: func() []*v1.Pod { return []*v1.Pod{pod("crit", SystemCriticalPriority, 60), pod("web", 0, 5)} },
		Kill: func(_ context.Context, p *v1.Pod, grace time.Duration) error {
			mu.Lock()
			killed = append(killed, p.Name)
			graces[p.Name] = grace
			mu.Unlock()
			done <- struct{}{}
			return nil
		},
		Changed: func() { mu.Lock(); changes++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if l.setTo != 30*time.Second || l.locks != 1 {
		t.Fatalf("logind delay set to %v, %d locks; want 30s and one", l.setTo, l.locks)
	}
	go func() { _ = m.Run(ctx) }()
	l.signals <- true
	<-done
	<-done
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	if len(killed) != 2 || killed[0] != "web" || killed[1] != "crit" {
		t.Errorf("killed %v, want the regular pod, then the critical one", killed)
	}
	if graces["web"] != 5*time.Second || graces["crit"] != 10*time.Second {
		t.Errorf("grace periods %v: the pod's own when shorter, else the group's", graces)
	}
	mu.Unlock()
	if !m.ShuttingDown() || m.Check() == nil {
		t.Error("the node is not shutting down")
	}
	l.mu.Lock()
	if l.released != 1 {
		t.Errorf("lock released %d times, want once", l.released)
	}
	l.mu.Unlock()
	// A cancelled shutdown: ready again, and the lock taken again.
	l.signals <- false
	time.Sleep(50 * time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.ShuttingDown() || l.locks != 2 {
		t.Errorf("after a cancelled shutdown: shutting down %v, %d locks", m.ShuttingDown(), l.locks)
	}
	mu.Lock()
	defer mu.Unlock()
	if changes != 2 {
		t.Errorf("%d changes of the node's readiness, want 2", changes)
	}
}

func TestStartWithoutTime(t *testing.T) {
	l := &fakeLogind{delay: 5 * time.Second, failSet: true, signals: make(chan bool)}
	m, err := New(Config{Logind: l, Groups: Groups(30*time.Second, 0, nil), Pods: func() []*v1.Pod { return nil },
		Kill: func(context.Context, *v1.Pod, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err == nil || l.locks != 0 {
		t.Errorf("logind that cannot be raised: %v, %d locks", err, l.locks)
	}
	if _, err := New(Config{Logind: l}); err == nil {
		t.Error("a manager without groups")
	}
}
