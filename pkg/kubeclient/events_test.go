package kubeclient

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHeldEventSink(t *testing.T) {
	base := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		recorded time.Duration // the event's last timestamp, from base
		noStamp  bool          // the event has no timestamp
		holdFor  time.Duration // hold reports true until base+holdFor
		want     time.Duration // when the write goes, from base
	}{
		{"not held", 0, false, 0, 0},
		{"held until the starts end", 0, false, 800 * time.Millisecond, 800 * time.Millisecond},
		{"held no longer than maxHold after it was recorded", 0, false, time.Minute, 5 * time.Second},
		{"recorded long ago: not held", -10 * time.Second, false, time.Minute, 0},
		{"no timestamp: held from now", 0, true, time.Minute, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := base
			var sent []time.Duration
			inner := fakeSink{create: func(e *corev1.Event) { sent = append(sent, now.Sub(base)) }}
			s := heldSink{inner: inner, maxHold: 5 * time.Second,
				hold:  func() bool { return now.Before(base.Add(tc.holdFor)) },
				now:   func() time.Time { return now },
				sleep: func(d time.Duration) { now = now.Add(d) },
			}
			e := &corev1.Event{}
			if !tc.noStamp {
				e.LastTimestamp = metav1.NewTime(base.Add(tc.recorded))
			}
			if _, err := s.Create(e); err != nil {
				t.Fatal(err)
			}
			if len(sent) != 1 || sent[0] < tc.want || sent[0] > tc.want+heldPoll {
				t.Errorf("written at %v, want %v", sent, tc.want)
			}
		})
	}
}

type fakeSink struct{ create func(*corev1.Event) }

func (f fakeSink) Create(e *corev1.Event) (*corev1.Event, error) { f.create(e); return e, nil }
func (f fakeSink) Update(e *corev1.Event) (*corev1.Event, error) { f.create(e); return e, nil }
func (f fakeSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	f.create(e)
	return e, nil
}
