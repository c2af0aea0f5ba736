package apiserver

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// DefaultEventTTL is how long an event lives after its last write, as
// upstream's --event-ttl.
const DefaultEventTTL = time.Hour

// maxEventSweepInterval bounds how long an expired event may outlive its TTL.
// Upstream's etcd leases, shared by the writes of a minute, are as coarse.
const maxEventSweepInterval = time.Minute

// eventTimes is the part of a stored event that says when it was last
// written, decoded without the rest of it.
type eventTimes struct {
	Metadata struct {
		UID               types.UID   `json:"uid"`
		ResourceVersion   string      `json:"resourceVersion"`
		CreationTimestamp metav1.Time `json:"creationTimestamp"`
	} `json:"metadata"`
	FirstTimestamp metav1.Time      `json:"firstTimestamp"`
	LastTimestamp  metav1.Time      `json:"lastTimestamp"`
	EventTime      metav1.MicroTime `json:"eventTime"`
	Series         *struct {
		LastObservedTime metav1.MicroTime `json:"lastObservedTime"`
	} `json:"series"`
}

// writerTime returns the latest time the event's writer stamped on it (lastTimestamp, eventTime,
// series.lastObservedTime), or its creation (set by the server) when that is later.
func (e *eventTimes) writerTime() time.Time {
	t := e.Metadata.CreationTimestamp.Time
	for _, c := range []time.Time{e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// lastWrite returns when the event was last written, by the server's own clock, as upstream keys the TTL
// to the etcd write itself: the time this server stored it (any write, recurring or not, starts its life
// over), never a time its writer supplies (an event dated 2999 expires like any other). An event read from
// the file at start has no such time: its writer's, but no later than the start, stands in for it.
func lastWrite(o *storage.Object, ev *eventTimes, opened time.Time) time.Time {
	if !o.Stored.IsZero() {
		return o.Stored
	}
	if t := ev.writerTime(); t.Before(opened) {
		return t
	}
	return opened
}

// eventExpired reports whether an event last written at last has outlived ttl.
func eventExpired(last, now time.Time, ttl time.Duration) bool {
	return !now.Before(last.Add(ttl))
}

// eventSweepInterval is how often expired events are looked for.
func eventSweepInterval(ttl time.Duration) time.Duration {
	return max(min(ttl/10, maxEventSweepInterval), controllerResync)
}

// expireEvents deletes the events that have outlived the TTL, at most once per
// sweep interval. A delete is conditional on the version it judged, so an
// event written meanwhile stays.
func (c *controller) expireEvents(ctx context.Context) error {
	ttl := c.s.cfg.EventTTL
	now := c.s.cfg.Clock.Now()
	if ttl <= 0 || now.Before(c.nextEventSweep) {
		return nil
	}
	objs, _ := c.s.store.List("events/")
	for _, o := range objs {
		var ev eventTimes
		if err := json.Unmarshal(o.Raw, &ev); err != nil || !eventExpired(lastWrite(o, &ev, c.s.store.Opened()), now, ttl) {
			continue
		}
		uid, rv := ev.Metadata.UID, ev.Metadata.ResourceVersion
		err := c.deleteKey(ctx, o.Key, &metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		if err != nil {
			return err
		}
	}
	c.nextEventSweep = now.Add(eventSweepInterval(ttl))
	return nil
}
