package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	eventtypes "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type containerEvent = runtimeapi.ContainerEventType

const (
	eventStarted = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	eventStopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
	eventDeleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	eventCreated = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
)

// eventHub fans container lifecycle events out to GetContainerEvents subscribers. Publishing never blocks: a
// subscriber that does not keep up misses events and relies on its relist, as the CRI contract allows.
type eventHub struct {
	mu     sync.Mutex
	subs   map[chan *runtimeapi.ContainerEventResponse]struct{}
	closed bool
	clock  func() time.Time
}

func newEventHub() *eventHub {
	return &eventHub{subs: map[chan *runtimeapi.ContainerEventResponse]struct{}{}, clock: time.Now}
}

func (h *eventHub) subscribe() (chan *runtimeapi.ContainerEventResponse, func()) {
	ch := make(chan *runtimeapi.ContainerEventResponse, 256)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *eventHub) publishContainer(id, sandboxID, podUID string, typ containerEvent) {
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: typ,
		CreatedAt:          h.clock().UnixNano(),
		PodSandboxStatus:   &runtimeapi.PodSandboxStatus{Id: sandboxID, Metadata: &runtimeapi.PodSandboxMetadata{Uid: podUID}},
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

func (h *eventHub) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
}

// GetContainerEvents streams container lifecycle events to ch until ctx is done. Events of this runtime come
// from containerd's task events, so an exit reaches the caller within milliseconds.
func (r *Runtime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connected func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	sub, cancel := r.events.subscribe()
	defer cancel()
	if connected != nil {
		connected(nil)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-sub:
			select {
			case ch <- ev:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// watchEvents follows containerd's task events (exits are recorded at once, OOM events remembered for the exit
// that follows) and container events (the record index learns of other clients' writes). It resubscribes after
// errors and then reconciles what it may have missed, which also reloads the record index.
func (r *Runtime) watchEvents(ctx context.Context) {
	for {
		r.followEvents(ctx)
		r.events.mu.Lock()
		closed := r.events.closed
		r.events.mu.Unlock()
		if closed || ctx.Err() != nil {
			return
		}
		time.Sleep(time.Second)
		if err := r.reconcileExits(ctx, false); err != nil {
			logger(ctx).Error(err, "Reconciling container exits failed")
		}
	}
}

func (r *Runtime) followEvents(ctx context.Context) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Only the topics handleEvent uses: an exec (a probe) makes three task events, of which only its exit,
	// which shares its topic with containers' exits, is sent.
	ns := `namespace==` + r.cfg.Namespace
	evCh, errCh := r.client.Subscribe(sctx, ns+`,topic=="/tasks/exit"`, ns+`,topic=="/tasks/oom"`,
		ns+`,topic~="^/(containers|images)/"`)
	r.names.follow(true)
	defer r.names.follow(false)
	for {
		select {
		case env := <-evCh:
			if env == nil {
				return
			}
			r.handleEvent(ctx, env.Topic, env.Event)
		case err := <-errCh:
			if err != nil && !r.events.closed {
				logger(ctx).V(2).Info("Event subscription ended", "err", err)
			}
			return
		}
	}
}

func (r *Runtime) handleEvent(ctx context.Context, topic string, ev typeurl.Any) {
	if !strings.HasPrefix(topic, "/tasks/") && !strings.HasPrefix(topic, "/containers/") && !strings.HasPrefix(topic, "/images/") {
		return
	}
	v, err := typeurl.UnmarshalAny(ev)
	if err != nil {
		return
	}
	switch e := v.(type) {
	case *eventtypes.ContainerCreate:
		r.refreshRecord(ctx, e.ID, nil)
	case *eventtypes.ContainerUpdate:
		r.refreshRecord(ctx, e.ID, e.Labels)
	case *eventtypes.ContainerDelete:
		r.records.forget(e.ID)
	case *eventtypes.ImageCreate:
		r.names.drop(e.Name)
	case *eventtypes.ImageUpdate:
		r.names.drop(e.Name)
	case *eventtypes.ImageDelete:
		r.names.drop(e.Name)
	case *eventtypes.TaskOOM:
		r.oomSeen.Store(e.ContainerID, struct{}{})
	case *eventtypes.TaskExit:
		if e.ID != e.ContainerID { // an exec'd process
			return
		}
		r.procs.forget(e.ContainerID)
		// Recorded off this loop: recording a container's exit deletes its task (a runc delete in the shim) and
		// drains its log, which would hold back every exit and record update queued behind it.
		go r.recordExitEvent(ctx, e)
	}
}

// recordExitEvent records the exit containerd reported for a sandbox's or container's main process.
func (r *Runtime) recordExitEvent(ctx context.Context, e *eventtypes.TaskExit) {
	rec, err := r.recordOf(ctx, e.ContainerID)
	if err != nil {
		return
	}
	switch rec.Labels[labelKind] {
	case kindSandbox:
		r.recordPauseExit(ctx, rec.ID, rec.Labels)
	case kindContainer:
		if err := r.persistExit(ctx, rec.ID, e.ExitStatus, exitTime(e.ExitedAt)); err != nil {
			logger(ctx).Error(err, "Recording container exit failed", "id", e.ContainerID)
		}
	}
}

// reconcileInterval is how often the recorded states are checked against containerd's tasks, the safety net
// behind the event watch that lists rely on.
const reconcileInterval = 10 * time.Second

// reconcileLoop checks the recorded states against the tasks every reconcileInterval until stop is closed.
func (r *Runtime) reconcileLoop(ctx context.Context, stop <-chan struct{}) {
	every(reconcileInterval, stop, func() {
		if err := r.reconcileExits(ctx, false); err != nil {
			logger(ctx).Error(err, "Reconciling container exits failed")
		}
	})
}

// every runs fn every interval until stop is closed.
func every(interval time.Duration, stop <-chan struct{}, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// reconcileExits records what happened while nobody watched: containers whose task stopped or vanished, and
// sandboxes whose pause process is gone. At start (nothing of this process is under way yet) a task that was
// created but never started counts as gone too: the process that was starting it died.
func (r *Runtime) reconcileExits(ctx context.Context, atStart bool) error {
	recs, err := r.client.ContainerService().List(ctx)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	// Sandboxes being created may have a record and no task yet. The set is taken after the records and
	// before the tasks: a sandbox whose record was listed either is in it or had its task already.
	creating := map[string]bool{}
	r.creating.Range(func(id, _ any) bool { creating[id.(string)] = true; return true })
	tasks, err := r.tasksByContainer(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		t := tasks[rec.ID]
		if atStart && t != nil && t.Status == task.Status_CREATED {
			t = nil
		}
		switch rec.Labels[labelKind] {
		case kindSandbox:
			if !creating[rec.ID] && (t == nil || t.Status == task.Status_STOPPED) {
				r.recordPauseExit(ctx, rec.ID, rec.Labels)
			}
		case kindContainer:
			if !exitUnrecorded(rec.Labels) {
				continue
			}
			switch {
			case t == nil:
				r.recordLostExit(ctx, rec.ID)
			case t.Status == task.Status_STOPPED:
				if err := r.persistExit(ctx, rec.ID, t.ExitStatus, exitTime(t.ExitedAt)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// recordLostExit marks a started container whose task is gone without a recorded exit (its shim died, or
// the host rebooted) as exited with an unknown status. The listing that found it may be stale: its exit may
// have been recorded (and its task deleted) since, or the container removed, so the record is read again
// under the container's exit lock, which recordExit holds while it records an exit.
func (r *Runtime) recordLostExit(ctx context.Context, id string) {
	unlock := r.exitLocks.lock(id)
	defer unlock()
	rec, err := r.recordOf(ctx, id)
	if err != nil {
		if !errdefs.IsNotFound(err) {
			logger(ctx).Error(err, "Recording a lost container failed", "id", id)
		}
		return
	}
	if !exitUnrecorded(rec.Labels) {
		return
	}
	err = r.setLabels(ctx, id, map[string]string{
		labelFinishedAt: unixNanoLabel(r.clock.Now()),
		labelExitCode:   "255",
		labelReason:     reasonUnknown,
		labelMessage:    "container process is gone and its exit was not recorded",
	})
	if err != nil {
		if !errdefs.IsNotFound(err) {
			logger(ctx).Error(err, "Recording a lost container failed", "id", id)
		}
		return
	}
	r.events.publishContainer(id, rec.Labels[labelSandboxID], rec.Labels[labelPodUID], eventStopped)
}

// exitUnrecorded reports whether a container's labels say it was started and its exit is not recorded.
func exitUnrecorded(labels map[string]string) bool {
	return labels[labelStartedAt] != "" && labels[labelFinishedAt] == ""
}

// recover runs at start: it re-attaches the log copies of running containers, removes the image volumes of
// containers whose creation a dying process left half done, and records exits that happened while this
// process was not running.
func (r *Runtime) recover(ctx context.Context) error {
	recs, err := r.client.ContainerService().List(ctx, `labels."`+labelKind+`"==`+kindContainer)
	if err != nil {
		return err
	}
	r.removeOrphanImageVolumes(ctx, recs)
	tasks, err := r.tasksByContainer(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		t := tasks[rec.ID]
		if t == nil || t.Status != task.Status_RUNNING {
			continue
		}
		meta, err := decodeContainerMeta(rec)
		if err != nil {
			continue
		}
		cont, err := r.client.LoadContainer(ctx, rec.ID)
		if err != nil {
			continue
		}
		c := r.newContainerIO(rec.ID, meta)
		_, err = cont.Task(ctx, r.attacher(c, meta.Stdin))
		if err != nil && !errdefs.IsNotFound(err) {
			logger(ctx).Error(err, "Re-attaching container output failed", "id", rec.ID)
			continue
		}
		r.io.put(rec.ID, c)
	}
	return r.reconcileExits(ctx, true)
}
