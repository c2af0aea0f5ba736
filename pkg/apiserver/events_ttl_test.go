package apiserver

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

func TestEventLastWrite(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	micro := func(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(t0.Add(d)) }
	for _, tc := range []struct {
		name string
		ev   eventTimes
		want time.Time
	}{
		{"created only", func() (e eventTimes) { e.Metadata.CreationTimestamp = at(0); return }(), t0},
		{"older occurrence stamped", func() (e eventTimes) {
			e.Metadata.CreationTimestamp, e.LastTimestamp = at(0), at(-time.Hour)
			return
		}(), t0},
		{"recurring, lastTimestamp", func() (e eventTimes) {
			e.Metadata.CreationTimestamp, e.FirstTimestamp, e.LastTimestamp = at(0), at(0), at(time.Minute)
			return
		}(), t0.Add(time.Minute)},
		{"events.k8s.io series", func() (e eventTimes) {
			e.Metadata.CreationTimestamp, e.EventTime = at(0), micro(time.Second)
			e.Series = &struct {
				LastObservedTime metav1.MicroTime `json:"lastObservedTime"`
			}{micro(time.Hour)}
			return
		}(), t0.Add(time.Hour)},
	} {
		if got := tc.ev.writerTime(); !got.Equal(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	// The server's own time of write counts, whatever the writer stamped; an event read at start counts
	// from its writer's time, but no later than the start.
	far := eventTimes{}
	far.Metadata.CreationTimestamp, far.LastTimestamp = at(0), metav1.NewTime(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC))
	if got := lastWrite(&storage.Object{Stored: t0.Add(time.Minute)}, &far, t0); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("stored by this server: %v", got)
	}
	if got := lastWrite(&storage.Object{}, &far, t0.Add(time.Hour)); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("read at start, dated far ahead: %v, want the start", got)
	}
	old := eventTimes{}
	old.Metadata.CreationTimestamp = at(0)
	if got := lastWrite(&storage.Object{}, &old, t0.Add(time.Hour)); !got.Equal(t0) {
		t.Errorf("read at start, written before: %v, want its own time", got)
	}
	if !eventExpired(t0, t0.Add(time.Hour), time.Hour) || eventExpired(t0, t0.Add(time.Hour-time.Second), time.Hour) {
		t.Error("eventExpired: an event expires exactly one TTL after its last write")
	}
	if got := eventSweepInterval(time.Hour); got != time.Minute {
		t.Errorf("sweep interval for 1h: %v", got)
	}
}

func TestEventsExpire(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	ts := startServer(t, "", func(c *Config) { c.Clock = clk })
	ctx := ctxT(t)
	events := ts.client.CoreV1().Events("default")
	involved := corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"}
	if _, err := events.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "old"}, InvolvedObject: involved,
		Reason: "Started"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Dated far ahead by its writer: the server's time of write counts.
	future := metav1.NewTime(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := events.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "dated-2999"}, InvolvedObject: involved,
		Reason: "Started", FirstTimestamp: future, LastTimestamp: future, EventTime: metav1.NewMicroTime(future.Time)},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	recurring, err := events.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "recurring"}, InvolvedObject: involved,
		Reason: "BackOff", Count: 1}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Seen again 50 minutes later: its life starts over, whatever time it carries.
	clk.Step(50 * time.Minute)
	recurring.Count = 5
	if _, err := events.Update(ctx, recurring, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(DefaultEventTTL - 50*time.Minute + time.Minute)
	for _, name := range []string{"old", "dated-2999"} {
		eventually(t, name+" removed one TTL after its write", func() bool {
			_, err := events.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	}
	if _, err := events.Get(ctx, "recurring", metav1.GetOptions{}); err != nil {
		t.Fatalf("event written within the TTL: %v", err)
	}
	clk.Step(time.Hour)
	eventually(t, "recurring event removed once its TTL passed", func() bool {
		_, err := events.Get(ctx, "recurring", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
