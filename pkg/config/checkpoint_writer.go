package config

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// checkpointWriter writes the API pods' changes to the checkpoint off the path that delivers them to the
// sync loop: each write is synced to disk (two fsyncs), which, one pod after another in a burst, held the
// last pods' admission back by hundreds of milliseconds. Changes of one pod are written in order, the latest
// replacing one not yet written; a removal is a nil pod. Until run starts (and after it returns) writes are
// made at once, by the caller. A node that dies within the few milliseconds between a pod's delivery and its
// write restarts without that change in its checkpoint, as if it had died just before the delivery.
type checkpointWriter struct {
	cp PodCheckpoint

	mu      sync.Mutex
	running bool
	pending map[types.UID]*v1.Pod
	order   []types.UID
	wake    chan struct{}
}

func newCheckpointWriter(cp PodCheckpoint) *checkpointWriter {
	return &checkpointWriter{cp: cp, pending: map[types.UID]*v1.Pod{}, wake: make(chan struct{}, 1)}
}

// put queues pod's latest state (nil: its removal) for uid.
func (w *checkpointWriter) put(ctx context.Context, uid types.UID, pod *v1.Pod) {
	w.mu.Lock()
	if !w.running {
		w.mu.Unlock()
		w.write(ctx, uid, pod)
		return
	}
	if _, queued := w.pending[uid]; !queued {
		w.order = append(w.order, uid)
	}
	w.pending[uid] = pod
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run writes what is queued until ctx is done, then what is left.
func (w *checkpointWriter) run(ctx context.Context) {
	w.mu.Lock()
	w.running = true
	w.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			// Writes go back to the callers only once nothing is queued, so that no later change of a pod
			// is written ahead of an earlier one still queued.
			for {
				w.drain(ctx)
				w.mu.Lock()
				if len(w.order) == 0 {
					w.running = false
					w.mu.Unlock()
					return
				}
				w.mu.Unlock()
			}
		case <-w.wake:
			w.drain(ctx)
		}
	}
}

// drain writes everything queued, in order.
func (w *checkpointWriter) drain(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.order) > 0 {
		uid := w.order[0]
		w.order = w.order[1:]
		pod := w.pending[uid]
		delete(w.pending, uid)
		w.mu.Unlock()
		w.write(ctx, uid, pod)
		w.mu.Lock()
	}
}

func (w *checkpointWriter) write(ctx context.Context, uid types.UID, pod *v1.Pod) {
	if pod == nil {
		if err := w.cp.DeletePod(uid); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot remove a pod from the checkpoint", "podUID", uid)
		}
		return
	}
	if err := w.cp.PutPod(pod); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot checkpoint a pod", "pod", klog.KObj(pod))
	}
}
