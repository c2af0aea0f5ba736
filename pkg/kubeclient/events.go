package kubeclient

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// EventSink writes a record.EventBroadcaster's events through c, each in its own namespace, as client-go's
// typed EventSinkImpl does.
func EventSink(c Interface) record.EventSink { return eventSink{c} }

type eventSink struct{ c Interface }

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.c.CoreV1().Events(e.Namespace).Create(context.Background(), e, metav1.CreateOptions{})
}

func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.c.CoreV1().Events(e.Namespace).Update(context.Background(), e, metav1.UpdateOptions{})
}

func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	if e.Name == "" {
		return nil, fmt.Errorf("patch event: no name")
	}
	return s.c.CoreV1().Events(e.Namespace).Patch(context.Background(), e.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}

// heldPoll is how often a held event write checks whether it may go.
const heldPoll = 20 * time.Millisecond

// HeldEventSink returns a sink whose writes wait while hold reports true, but never past maxHold after the
// event was recorded (its last timestamp). The kubelet holds its events while it is starting pods: a burst
// of 30 pod starts records about 90 events (Pulled, Created, Started), whose writes would otherwise take CPU
// from the starts themselves on a small node. An event's timestamps are those it was recorded with, so a
// held event reads the same once written; its write is merely later.
func HeldEventSink(inner record.EventSink, hold func() bool, maxHold time.Duration) record.EventSink {
	return heldSink{inner: inner, hold: hold, maxHold: maxHold, now: time.Now, sleep: time.Sleep}
}

type heldSink struct {
	inner   record.EventSink
	hold    func() bool
	maxHold time.Duration
	now     func() time.Time
	sleep   func(time.Duration)
}

func (s heldSink) wait(e *corev1.Event) {
	recorded := e.LastTimestamp.Time
	if recorded.IsZero() {
		recorded = s.now()
	}
	for s.hold() && s.now().Sub(recorded) < s.maxHold {
		s.sleep(heldPoll)
	}
}

func (s heldSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.wait(e)
	return s.inner.Create(e)
}

func (s heldSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.wait(e)
	return s.inner.Update(e)
}

func (s heldSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.wait(e)
	return s.inner.Patch(e, data)
}
